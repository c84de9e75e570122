"""Every shipped config composes through Hydra and builds: each experiment preset with
each value its sweep names, every data set, every method and every metric set (as
lightning-hydra-template's config tests do). Nothing is fitted and no data are read: a
config that only breaks when its cell runs (a typo in a preset's sweep, a method that names
an unknown parameter, a metric set that names no metric) fails here."""

import inspect

import pytest
from hydra import compose, initialize_config_module

from calbench.calibrators import make_calibrator
from calbench.conf_files import group_files, read_group, swept_values
from calbench.data import LOADERS
from calbench.metrics import metric_spec
from calbench.runner.build import cell_config, method_params
from calbench.runner.checks import check_run_config, method_grid
from calbench.runner.spec import CellSpec


@pytest.fixture(scope="module", autouse=True)
def _hydra():
    """One Hydra initialisation for the module: composing is then a few milliseconds."""
    with initialize_config_module("calbench.conf", version_base="1.3"):
        yield


def _compose(*overrides):
    return compose("config", overrides=list(overrides))


def _built(spec: CellSpec) -> None:
    """What a cell builds before it reads data: checks, hash, calibrator, grid, metrics."""
    check_run_config(spec)
    cell_config(spec)
    method = spec.method
    dataset = spec.dataset["name"]
    if method.get("tuned") and dataset not in method["tuned"]:
        dataset = next(iter(method["tuned"]))
    calibrator = make_calibrator(method["calibrator"], **method_params(method, dataset))
    calibrator.set_params(**{k: v[0] for k, v in method_grid(method).items()}).validate_params()
    for name, options in spec.metrics.items():
        metric_spec((options or {}).get("fn", name))
    loader = spec.dataset["loader"]
    assert loader in LOADERS, f"{dataset}: loader {loader!r} is not registered"
    accepted = set(inspect.signature(LOADERS[loader]).parameters)
    unknown = set(spec.dataset) - accepted - {"loader", "name", "registry"}
    assert not unknown, f"dataset {dataset}: keys {unknown} reach no loader parameter"


def _sweep_points():
    """Each preset with each method its sweep names (what a preset's protocol and metrics
    meet; a preset that sweeps none, once); its other swept values are checked by name
    below, which is as strict for a typo and a hundred compositions cheaper."""
    for preset, config in read_group("experiment").items():
        for method in swept_values(config, "method") or [None]:
            yield pytest.param(preset, method, id=f"{preset}:{method}")


@pytest.mark.parametrize("preset,method", list(_sweep_points()))
def test_every_preset_composes_with_every_method_of_its_sweep(preset, method):
    config = read_group("experiment")[preset]
    overrides = [f"experiment={preset}"] + ([f"method={method}"] if method else [])
    params = ((config.get("hydra") or {}).get("sweeper") or {}).get("params") or {}
    # the first value of every other swept key, as the sweep's first cell has it
    overrides += [f"{k}={swept_values(config, k)[0]}" for k in params if k != "method"]
    _built(CellSpec.of(_compose(*overrides)))


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


@pytest.mark.parametrize("group", ["dataset", "method", "metrics"])
def test_every_dataset_method_and_metric_set_composes(group):
    for name in group_files(group):
        _built(CellSpec.of(_compose(f"{group}={name}")))
