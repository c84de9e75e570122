"""Objects from a cell's record (`calbench.runner.spec.CellSpec`): its data set, its
calibrator with the run's criterion and grid, and how inner CV rates grid points.
Running the folds is `calbench.runner.cell`'s."""

from __future__ import annotations

import functools
import inspect

from sklearn.model_selection import ParameterGrid

from calbench.calibrators import make_calibrator
from calbench.criteria import PARAMETRISED, decision_criterion
from calbench.data import LOADERS, Dataset, load_dataset
from calbench.errors import CalbenchError
from calbench.metrics import empirical_risk, log_loss
from calbench.runner.checks import method_grid
from calbench.runner.decision_task import DecisionTask, decision_task
from calbench.runner.spec import CellSpec


def cell_config(spec) -> dict:
    """The groups that determine the cell's numbers, as hashed and stored: a criterion
    that cannot change this method's numbers is stored as ``none``, so a sweep over
    criteria runs the method once (the other points find it in the store)."""
    spec = CellSpec.of(spec)
    cell = spec.groups()
    method = cell["method"]
    calibrator = make_calibrator(method["calibrator"], **(method.get("params") or {}))
    if not criterion_keys(calibrator, method):
        cell["criterion"] = {"name": "none"}
    return cell


def criterion_keys(calibrator, method: dict) -> list[str]:
    """The calibrator parameters the run's criterion sets (those its steps declare, see
    `Calibrator.run_inputs`); a criterion the method's own YAML fixes (ETS and IROvA-TS fit
    on the MSE) is kept."""
    fixed = method.get("params") or {}
    return [k for k in calibrator.run_input_keys("criterion") if k not in fixed]


def _loader_options(loader: str):
    return inspect.signature(LOADERS[loader]).parameters if loader in LOADERS else {}


def load_configured_dataset(dataset: dict) -> Dataset:
    """The data set a ``dataset`` config group describes (its registry entry pins the
    published file's checksum)."""
    options = dict(dataset)
    registry = options.pop("registry", None) or {}
    loader = options.pop("loader")
    files = registry.get("files") or []
    if len(files) == 1 and files[0].get("sha256") and "sha256" in _loader_options(loader):
        options["sha256"] = files[0]["sha256"]  # a registered set's file must be the published one
    display_name = options.pop("name", None)
    if display_name and "name" in _loader_options(loader):
        options["name"] = display_name  # the loader names its cache files by it
    loaded = load_dataset(loader, **options)
    if display_name:
        loaded.name = display_name
    return loaded


def criterion_spec(spec, n_classes: int, task: DecisionTask | None = None, eps=None):
    """What the calibrator minimises: a criterion name, or a dict with its options (the
    decision criteria's loss matrices from ``task`` at ``eps``, default: the run's
    fold-free loss; see `calbench.criteria.decision_criterion`)."""
    spec = CellSpec.of(spec)
    options = dict(spec.criterion)
    options.pop("grid", None)  # the criterion's own hyperparameters, see `criterion_grid`
    options.pop("select_by", None)  # how inner CV rates them, see `selection_score`
    name = options.pop("name")
    if name in PARAMETRISED and spec.device != "cpu":
        options["device"] = spec.device  # torch-written criteria compute there
    if name not in ("direct", "integral"):
        return {"name": name, **options} if options else name
    task = task or decision_task(spec.loss, spec.shift, None, n_classes)
    return decision_criterion(name, options, task.training_loss(eps), task.family, n_classes)


def criterion_grid(spec, criterion, keys) -> dict:
    """A criterion config's ``grid:`` (Ho 3.6 searches the Direct Loss's lambda and beta) as
    grid points of the calibrator's ``criterion`` parameter: one full spec per combination."""
    options = CellSpec.of(spec).criterion.get("grid") or {}
    if not options:
        return {}
    if not isinstance(criterion, dict):
        criterion = {"name": criterion}
    variants = [dict(criterion, **point) for point in ParameterGrid(options)]
    return {key: variants for key in keys}


def method_params(method: dict, dataset_name: str) -> dict:
    """The method's fixed params, with those its paper's authors tuned for this data set
    (``tuned: {DATASET: {param: value}}``, used where a paper published its choice instead
    of the search that made it)."""
    params = dict(method.get("params") or {})
    tuned = method.get("tuned")
    if tuned is None:
        return params
    if dataset_name not in tuned:
        raise CalbenchError(
            f"method {method['name']!r} uses the hyperparameters its authors tuned per data "
            f"set, and they published none for {dataset_name!r}; it runs on: "
            f"{', '.join(sorted(tuned))}."
        )
    return {**params, **tuned[dataset_name]}


def build_calibrator(spec, dataset: Dataset, task: DecisionTask | None = None, eps=None):
    """The method's calibrator with its fixed params, the criterion (for the decision
    ``task`` at ``eps``; default: the run's fold-free loss), and its grid."""
    spec = CellSpec.of(spec)
    method = spec.method
    calibrator = make_calibrator(method["calibrator"], **method_params(method, dataset.name))
    accepted = calibrator.get_params()
    # Hand the criterion (and the known true map) to every step that takes one, nested
    # steps of a composition included.
    keys = criterion_keys(calibrator, method)
    if keys:
        criterion = criterion_spec(spec, dataset.n_classes, task, eps)
        calibrator.set_params(**{k: criterion for k in keys})
    calibrator.set_params(
        **{k: dataset.true_map for k in calibrator.run_input_keys("true_map")},
        **{k: spec.device for k in calibrator.run_input_keys("device")},
    )
    grid = method_grid(method)
    if keys:
        grid.update(criterion_grid(spec, criterion, keys))
    unknown = sorted(set(grid) - set(accepted))
    if unknown:
        raise CalbenchError(
            f"method {method['name']!r}: grid names unknown parameter(s) {unknown}; "
            f"the calibrator takes {sorted(accepted)}."
        )
    return calibrator, grid, spec.criterion["name"] if keys else "none"


def selection_score(spec, loss_matrix, log_loss_clip=None):
    """How inner CV rates a grid point: log-loss (``log_loss_clip`` as `log_loss`'s
    ``clip``), or with ``criterion.select_by: empirical_risk`` the mean cost of the Bayes
    decisions under ``loss_matrix``."""
    if CellSpec.of(spec).criterion.get("select_by", "log_loss") != "empirical_risk":
        return functools.partial(log_loss, clip=log_loss_clip)
    return lambda probs, y: empirical_risk(probs, y, loss_matrix=loss_matrix)


def public_params(chosen: dict, model=None) -> dict:
    """Chosen parameters as stored: a criterion spec shrinks to its name and scalar options
    (its loss matrices are in the cell's config); a value the fitted ``model`` adjusted
    (k clipped to the data size: ``n_neighbors_``) is stored as the value it used."""
    chosen = {k: getattr(model, f"{k}_", v) for k, v in chosen.items()}
    return {
        k: {o: v for o, v in value.items() if not isinstance(v, list)}
        if isinstance(value, dict)
        else value
        for k, value in chosen.items()
    }
