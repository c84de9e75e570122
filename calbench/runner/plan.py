"""A cell's plan: what one ``calbench run`` cell does, built once from its config.

`plan_cell` is the runner's entrance. It resolves the Hydra config once (`CellSpec.of`),
runs every check of it (`calbench.runner.checks`), and reads each config group into what
the rest of the runner uses: the method's calibrator with its grid, the criterion (its
options, its own grid, how inner CV rates it), the protocol (`Protocol`: outer folds and
inner CV), the metric set, and the cell's hash (`calbench.runner.cell_identity`). What
needs the data (the data set, the decision task of a fold, the calibrator for that task)
comes from the plan's methods.
Below the plan, nothing reads a config dict: `calbench.runner.cell` fits and scores from
it, `calbench.runner.job` stores what the cell gave under `CellPlan.hash`.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field

from omegaconf import DictConfig
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid

from calbench.calibrators.base import Calibrator
from calbench.calibrators.methods import method_from_config
from calbench.criteria import PARAMETRISED, decision_criterion
from calbench.data import LOADERS, Dataset, load_dataset
from calbench.data.identity import data_identity, user_files_name
from calbench.data.views import apply_views, view_keys
from calbench.errors import CalbenchError
from calbench.metrics import empirical_risk, log_loss, metric_spec
from calbench.runner.cell_identity import cell_groups, cell_hash
from calbench.runner.checks import check_run_config
from calbench.runner.decision_task import DecisionTask, decision_task
from calbench.runner.progress import current_sweep_point
from calbench.runner.protocols import Fold, Protocol
from calbench.runner.spec import CellSpec

#: How inner CV rates a grid point (``criterion.select_by``).
SELECT_BY = ("log_loss", "empirical_risk")


@dataclass(frozen=True)
class Criterion:
    """A ``criterion`` config group: what the calibrator minimises (``name`` and
    ``options``), the criterion's own grid (Ho 3.6 searches the Direct Loss's lambda and
    beta), and how inner CV rates grid points. A criterion YAML leaves ``select_by`` out
    for the log-loss, so it stays out of the cells' hashes (`calbench.runner.cell_identity`)."""

    name: str
    options: dict
    grid: dict
    select_by: str = "log_loss"

    @classmethod
    def of(cls, criterion: dict) -> Criterion:
        options = dict(criterion)
        name = options.pop("name")
        grid = options.pop("grid", None) or {}
        select_by = options.pop("select_by", "log_loss")
        if select_by not in SELECT_BY:
            raise CalbenchError(
                f"criterion {name!r}: select_by={select_by!r}; it is one of {', '.join(SELECT_BY)}."
            )
        return cls(name, options, grid, select_by)


def _loader_options(loader: str):
    return inspect.signature(LOADERS[loader]).parameters if loader in LOADERS else {}


#: The dataset config's keys the plan reads itself, besides the views' (`calbench.data.views`);
#: every other key is a loader parameter.
PLAN_DATASET_KEYS = frozenset({"loader", "name", "registry"})


def load_configured_dataset(dataset: dict) -> Dataset:
    """The data set a ``dataset`` config group describes (its registry entry pins the
    published file's checksum)."""
    options = dict(dataset)
    registry = options.pop("registry", None) or {}
    views = {key: options.pop(key) for key in view_keys() if key in options}
    loader = options.pop("loader")
    sums = [f.get("sha256") for f in registry.get("files") or []]
    if sums and all(sums) and "sha256" in _loader_options(loader):
        # A registered set's files must be the published ones (a list where there are several).
        options["sha256"] = sums[0] if len(sums) == 1 else sums
    display_name = options.pop("name", None)
    if display_name and "name" in _loader_options(loader):
        options["name"] = display_name  # the loader names its cache files by it
    loaded = load_dataset(loader, **options)
    if display_name:
        loaded.name = display_name
    return apply_views(loaded, views)


def criterion_keys(calibrator: Calibrator, method: dict) -> tuple[str, ...]:
    """The calibrator parameters the run's criterion sets (those its steps declare, see
    `Calibrator.run_inputs`); a criterion the method's own YAML fixes (ETS and IROvA-TS fit
    on the MSE) is kept."""
    fixed = method.get("params") or {}
    return tuple(k for k in calibrator.run_input_keys("criterion") if k not in fixed)


@dataclass(frozen=True)
class CellPlan:
    """One cell, planned: see the module docstring. Build it with `plan_cell`."""

    spec: CellSpec
    protocol: Protocol
    criterion: Criterion
    #: The method's calibrator with its fixed params and the run's device, never fitted:
    #: each fit takes a clone (`calibrator`).
    template: Calibrator
    #: The method's grid, each value a list.
    grid: dict
    #: The template's parameters that take the run's criterion (none: the criterion cannot
    #: change this method's numbers).
    criterion_keys: tuple[str, ...]
    #: Whether the chosen grid point's inner models are averaged (Kull 4.1): the method's
    #: own choice where it makes one (Kull et al. fitted VecS once on the whole
    #: calibration set, their ODIR maps as an average), else the protocol's.
    average_inner_models: bool
    #: The groups that determine the cell's numbers, as stored (`cell_identity.cell_groups`).
    cell: dict = field(repr=False)
    hash: str
    #: The user's files it reads, by name and content (`calbench.data.identity`); None
    #: for a registered or generated data set.
    data: dict | None = None

    @property
    def method(self) -> str:
        return self.spec.method["name"]

    @property
    def criterion_name(self) -> str:
        """As stored: ``none`` where the criterion cannot change the method's numbers, so a
        sweep over criteria runs the method once (the other points find it in the store)."""
        return self.criterion.name if self.criterion_keys else "none"

    @property
    def metrics(self) -> dict:
        """Output name -> options (`calbench.metrics.evaluate`), names checked."""
        return self.spec.metrics

    def labels(self) -> dict:
        """The cell's rows' labels that its config gives (the data set's come with it)."""
        spec = self.spec
        return {
            "experiment": spec.experiment,
            "method": self.method,
            "criterion": self.criterion_name,
            "loss": spec.loss["name"],
            "shift": spec.shift["name"],
            "protocol": self.protocol.name,
            "seed": spec.seed,
        }

    @property
    def label(self) -> str:
        """``experiment | data set | method``, the data set as tables name it (a user's file
        by its name or stem, an HDF5 task by its file and task, not by the loader), then in
        a sweep the overrides that tell the cell from the others (`sweep_points`)."""
        dataset = self.spec.dataset
        data = dataset["name"]
        if not data and self.data is not None:
            data = user_files_name(dataset)
        elif not data and dataset.get("loader") == "hdf5":
            from calbench.data.hdf5 import hdf5_task_name

            task = str(dataset["task"])
            split = dataset.get("split_task")
            data = task.replace("/", " / ") if split else hdf5_task_name(dataset["path"], task)
        label = f"{self.spec.experiment} | {data or dataset['loader']} | {self.method}"
        point = current_sweep_point()  # what tells it from the other cells of its sweep
        return f"{label} | {point}" if point else label

    def load_dataset(self) -> Dataset:
        return load_configured_dataset(self.spec.dataset)

    def folds(self, dataset: Dataset):
        return self.protocol.folds(dataset, seed=self.spec.seed)

    def task(self, fold: Fold | None, n_classes: int) -> DecisionTask:
        """The decision problem of the run's loss and prior shift on ``fold`` (None: the
        fold-free loss only)."""
        return decision_task(self.spec.loss, self.spec.shift, fold, n_classes)

    def tuned_params(self, dataset_name: str) -> dict:
        """The hyperparameters the method's paper's authors tuned for this data set
        (``tuned: {DATASET: {param: value}}``, used where a paper published its choice
        instead of the search that made it); {} for a method without them."""
        tuned = self.spec.method.get("tuned")
        if tuned is None:
            return {}
        if dataset_name not in tuned:
            raise CalbenchError(
                f"method {self.method!r} uses the hyperparameters its authors tuned per data "
                f"set, and they published none for {dataset_name!r}; it runs on: "
                f"{', '.join(sorted(tuned))}."
            )
        return dict(tuned[dataset_name])

    def criterion_spec(self, n_classes: int, task: DecisionTask, eps=None):
        """What the calibrator minimises: a criterion name, or a dict with its options (the
        decision criteria's loss matrices from ``task`` at ``eps``; see
        `calbench.criteria.decision_criterion`)."""
        name, options = self.criterion.name, dict(self.criterion.options)
        if name in PARAMETRISED and self.spec.device != "cpu":
            options["device"] = self.spec.device  # torch-written criteria compute there
        if name not in ("direct", "integral"):
            return {"name": name, **options} if options else name
        return decision_criterion(name, options, task.training_loss(eps), task.family, n_classes)

    def calibrator(self, dataset: Dataset, task: DecisionTask, eps=None):
        """(unfitted calibrator, grid) for ``dataset`` and the decision ``task`` at ``eps``
        (default: the task's own): the method's calibrator with its tuned params, the
        criterion, the known true map, and the grid with the criterion's own points."""
        calibrator = clone(self.template).set_params(**self.tuned_params(dataset.name))
        # Hand the criterion (and the known true map) to every step that takes one, nested
        # steps of a composition included.
        grid = dict(self.grid)
        if self.criterion_keys:
            criterion = self.criterion_spec(dataset.n_classes, task, eps)
            calibrator.set_params(**{k: criterion for k in self.criterion_keys})
            grid.update(self._criterion_grid(criterion))
        true_map = dataset.true_map
        calibrator.set_params(**{k: true_map for k in calibrator.run_input_keys("true_map")})
        return calibrator, grid

    def _criterion_grid(self, criterion) -> dict:
        """The criterion's ``grid:`` as grid points of the calibrator's criterion
        parameters: one full criterion spec per combination."""
        if not self.criterion.grid:
            return {}
        if not isinstance(criterion, dict):
            criterion = {"name": criterion}
        variants = [dict(criterion, **point) for point in ParameterGrid(self.criterion.grid)]
        return {key: variants for key in self.criterion_keys}

    def selection_score(self, loss_matrix, log_loss_clip=None):
        """How inner CV rates a grid point: log-loss (``log_loss_clip`` as `log_loss`'s
        ``clip``), or with ``criterion.select_by: empirical_risk`` the mean cost of the
        Bayes decisions under ``loss_matrix``."""
        if self.criterion.select_by == "log_loss":
            return functools.partial(log_loss, clip=log_loss_clip)
        return lambda probs, y: empirical_risk(probs, y, loss_matrix=loss_matrix)


def plan_cell(cfg: DictConfig | dict | CellSpec) -> CellPlan:
    """The plan of a composed config (Hydra's, or the plain resolved one of calbench's
    launcher; or of its record), every check run."""
    spec = cfg if isinstance(cfg, CellSpec) else CellSpec.of(cfg)
    check_run_config(spec)
    method = spec.method
    template, grid = method_from_config(method)
    template.set_params(**{k: spec.device for k in template.run_input_keys("device")})
    for name, options in spec.metrics.items():  # unknown metric names fail before any fit
        metric_spec((options or {}).get("fn", name))
    protocol = Protocol.of(spec.protocol)
    keys = criterion_keys(template, method)
    cell = cell_groups(spec, template, takes_criterion=bool(keys))
    data = data_identity(spec.dataset)
    return CellPlan(
        spec=spec,
        protocol=protocol,
        criterion=Criterion.of(spec.criterion),
        template=template,
        grid=grid,
        criterion_keys=keys,
        average_inner_models=method.get("average_inner_models", protocol.average_inner_models),
        cell=cell,
        hash=cell_hash(cell, data),
        data=data,
    )
