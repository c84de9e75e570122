"""Every shipped config composes through Hydra and builds: each experiment preset with
each value its sweep names, every data set, every method and every metric set (as
lightning-hydra-template's config tests do). Nothing is fitted and no data are read: a
config that only breaks when its cell runs (a typo in a preset's sweep, a method that names
an unknown parameter, a metric set that names no metric) fails here. The configs are the
ones calbench's launcher hands its cells (`tests.runner.test_sweep_composer.composed`), which that
module checks against Hydra's own."""

import inspect
import json
from pathlib import Path

import pytest

from calbench.conf_files import group_files, read_group, swept_values
from calbench.data import LOADERS
from calbench.data.views import view_keys
from calbench.reproduce.spreads import DRAWN
from calbench.runner.plan import PLAN_DATASET_KEYS, plan_cell
from tests.runner.test_sweep_composer import composed as _compose


def _built(*overrides) -> None:
    """What a cell builds before it reads data: its plan (checks, hash, calibrator, grid,
    criterion, protocol, metric names), its calibrator's first grid point and tuned params,
    and its loader's keys."""
    plan = plan_cell(_compose(*overrides))
    spec = plan.spec
    dataset = spec.dataset["name"]
    tuned = spec.method.get("tuned")
    if tuned and dataset not in tuned:
        dataset = next(iter(tuned))
    calibrator = plan.template.set_params(**plan.tuned_params(dataset))
    calibrator.set_params(**{k: v[0] for k, v in plan.grid.items()}).validate_params()
    loader = spec.dataset["loader"]
    assert loader in LOADERS, f"{dataset}: loader {loader!r} is not registered"
    accepted = set(inspect.signature(LOADERS[loader]).parameters)
    unknown = set(spec.dataset) - accepted - PLAN_DATASET_KEYS - view_keys()
    assert not unknown, f"dataset {dataset}: keys {unknown} reach no loader parameter"


def _overrides(config: dict) -> dict:
    """A preset's ``defaults`` overrides, ``override /GROUP`` -> option."""
    picked = {}
    for item in config.get("defaults", []):
        if isinstance(item, dict):
            picked.update(item)
    return picked


def _setting(config: dict) -> str:
    """What a preset sets besides its name and sweep, its data set by loader: presets alike
    in it (CalArena's seven collections, by twos and threes) meet a method identically."""
    picked = _overrides(config)
    dataset = picked.pop("override /dataset", None)
    if dataset:
        picked["loader"] = read_group("dataset")[dataset].get("loader")
    rest = {k: v for k, v in config.items() if k not in ("defaults", "experiment", "hydra")}
    return json.dumps([picked, rest], sort_keys=True, default=str)


def _protocol_and_metrics(config: dict) -> str:
    """The preset's protocol and metric set: what a method meets that the group tests'
    default composition does not."""
    picked = _overrides(config)
    return f"{picked.get('override /protocol')}|{picked.get('override /metrics')}"


def _sweep_points():
    """Each preset with each method its sweep names (what a preset's protocol and metrics
    meet; a preset that sweeps none, once), once per setting (`_setting`); its other swept
    values are checked by name below, which is as strict for a typo and a hundred
    compositions cheaper. The quick suite composes a method once per protocol and metric
    set; the slow suite the rest (about 150 compositions, 20 s)."""
    seen, quick = set(), set()
    for preset, config in read_group("experiment").items():
        setting = _setting(config)
        for method in swept_values(config, "method") or [None]:
            if (setting, method) in seen:
                continue
            seen.add((setting, method))
            first = (_protocol_and_metrics(config), method) not in quick
            quick.add((_protocol_and_metrics(config), method))
            marks = () if first else (pytest.mark.slow,)
            yield pytest.param(preset, method, id=f"{preset}:{method}", marks=marks)


def _sweep_overrides(preset: str, method: str | None) -> list[str]:
    """The preset with ``method`` and the first value of every other key it sweeps, as the
    sweep's first cell has them; of a procedure twin's draws (seeds, folds, ...), the
    lowest, since their order is the order a reproduction tries them in (witnesses first,
    `calbench.reproduce.procedures`), which may change without changing any cell."""
    config = read_group("experiment")[preset]
    overrides = [f"experiment={preset}"] + ([f"method={method}"] if method else [])
    params = ((config.get("hydra") or {}).get("sweeper") or {}).get("params") or {}

    def first(key):
        values = swept_values(config, key)
        if key.removeprefix("method.params.") in DRAWN:
            return min(values, key=lambda v: (isinstance(v, str), v))
        return values[0]

    return overrides + [f"{k}={first(k)}" for k in params if k != "method"]


@pytest.mark.parametrize("preset,method", list(_sweep_points()))
def test_every_preset_composes_with_every_method_of_its_sweep(preset, method):
    _built(*_sweep_overrides(preset, method))


@pytest.mark.parametrize("preset", sorted(read_group("experiment")))
def test_every_swept_value_names_a_config_and_tuned_methods_cover_the_sweep(preset):
    config = read_group("experiment")[preset]
    groups = {"dataset", "method", "classifier", "shift", "loss", "criterion", "protocol"}
    for key in ((config.get("hydra") or {}).get("sweeper") or {}).get("params") or {}:
        if key in groups:
            missing = set(swept_values(config, key)) - set(group_files(key))
            assert not missing, f"{preset} sweeps {key} over {missing}: no such config"
    methods = read_group("method")
    for name in swept_values(config, "method"):
        tuned = methods[name].get("tuned")
        if tuned:
            uncovered = set(swept_values(config, "dataset")) - set(tuned)
            assert not uncovered, f"{preset}: {name} has no tuned values for {uncovered}"


GROUPS = ["dataset", "method", "metrics", "criterion", "loss", "shift", "protocol", "classifier"]


@pytest.mark.parametrize("group", GROUPS)
def test_every_config_of_every_group_composes(group):
    for name in group_files(group):
        _built(f"{group}={name}")


#: The hash of every composition above, written by the code before the cell plan
#: (`python -m tests.cli.test_configs` rewrites it: do that only for a change that is meant to
#: make stored cells run again).
HASHES = Path(__file__).with_name("cell_hashes.json")


def _hashed_compositions():
    for preset, config in read_group("experiment").items():
        for method in swept_values(config, "method") or [None]:
            yield _sweep_overrides(preset, method)
    for group in GROUPS[:-1]:
        for name in group_files(group):
            yield [f"{group}={name}"]
    yield ["dataset=uci_iris", "classifier=logistic", "protocol=kull_uci"]


def test_cell_hashes_are_those_stored_sweeps_were_written_under():
    """A stored cell is found by its hash: every shipped composition keeps the hash it had
    before the runner read configs through a plan (323 of them; rewritten when
    the pseudo-count bound renamed the papers' isotonic and IOP maps, *_plain, for
    Valk's and Gupta's Keras maps when they took the unclipped loss of their Keras, for
    the full-matrix maps when L-BFGS took exact row blocks, ``preconditioner``, and for
    Gupta's Keras twins when their KS errors took his float32 sums,
    ``recalibrate_py_ks_error``)."""
    expected = json.loads(HASHES.read_text())
    pinned = [o for o in _hashed_compositions() if " ".join(o) in expected]
    got = {" ".join(o): plan_cell(_compose(*o)).hash for o in pinned}
    assert len(expected) == 323 and set(expected) == set(got)
    changed = {k: (expected[k], got[k]) for k in expected if got[k] != expected[k]}
    assert not changed, f"{len(changed)} cell hashes changed, e.g. {next(iter(changed.items()))}"


if __name__ == "__main__":  # the pinned compositions' new hashes (later presets stay out)
    pinned = json.loads(HASHES.read_text())
    for overrides in _hashed_compositions():
        if " ".join(overrides) in pinned:
            pinned[" ".join(overrides)] = plan_cell(_compose(*overrides)).hash
    HASHES.write_text(json.dumps(pinned, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", list(group_files("method")))
def test_every_method_name_means_the_same_in_python(name):
    """`make_calibrator(NAME)` / `method(NAME)` build what `calbench run method=NAME`
    builds: the same calibrator parameters and the same grid (one definition, the YAML)."""
    from sklearn.base import clone

    from calbench.calibrators import make_calibrator, method

    planned = plan_cell(_compose(f"method={name}"))
    tuned = read_group("method")[name].get("tuned")
    dataset = next(iter(tuned)) if tuned else None
    calibrator, grid = method(name, dataset=dataset)
    expected = clone(planned.template).set_params(**(tuned or {}).get(dataset, {}))
    assert repr(calibrator.get_params()) == repr(expected.get_params())
    assert grid == planned.grid
    made = make_calibrator(name, **({"dataset": dataset} if dataset else {}))
    assert repr(made.get_params()) == repr(expected.get_params())
    if grid:  # a parameter given in Python is fixed, no longer searched
        key, values = next(iter(grid.items()))
        fixed, rest = method(name, dataset=dataset, **{key: values[0]})
        assert key not in rest and fixed.get_params()[key] == values[0]
