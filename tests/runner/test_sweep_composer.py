"""calbench's launcher composes each distinct part of a sweep once
(`hydra_plugins.calbench_launcher.sweep_composer`): its configs must be Hydra's own, value
for value, for every preset and every value its sweep names, and wherever it cannot be sure it must
hand the job to Hydra whole."""

import functools
import itertools
import random

import pytest

from calbench.conf_files import read_group, swept_values
from hydra_plugins.calbench_launcher.sweep_composer import (
    SweepComposer,
    as_cell_config,
    resolve,
)
from hydra_plugins.calbench_sweeper.calbench_sweeper import representative_jobs


@functools.cache
def _config_loader():
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path

    return ConfigLoaderImpl(config_search_path=create_config_search_path("pkg://calbench.conf"))


def hydra_compose(overrides):
    """Hydra's own composition of calbench's config with ``overrides``, its ``hydra`` node
    included, as Hydra's launchers compose a job: what `SweepComposer` is checked against."""
    from hydra.types import RunMode

    return _config_loader().load_configuration("config", list(overrides), run_mode=RunMode.RUN)


def hydras(overrides) -> tuple[dict, dict]:
    """Hydra's composition of a job, as the cell gets it: resolved, without ``hydra``, and
    the config-group choices."""
    return as_cell_config(hydra_compose(overrides))


@functools.cache
def composer(*common: str) -> SweepComposer:
    """One composer per preset, shared by the tests of a run (each part composed once)."""
    return SweepComposer(hydra_compose, [list(common)])


def composed(*overrides: str) -> dict:
    """The plain resolved config calbench's launcher hands the cell of these overrides."""
    common = (o for o in overrides if o.startswith("experiment="))
    return composer(*common).resolved(overrides)[0]


def preset_jobs(preset: str) -> list[list[str]]:
    """Every job of the preset's sweep, its overrides in the order Hydra's basic sweeper
    gives them (the preset's swept keys, then the command line's ``experiment=``)."""
    config = read_group("experiment")[preset]
    params = ((config.get("hydra") or {}).get("sweeper") or {}).get("params") or {}
    values = [[f"{key}={v}" for v in swept_values(config, key)] for key in params]
    return [[*job, f"experiment={preset}"] for job in itertools.product(*values)]


def _equal_to_hydras(preset: str, every_value: bool) -> None:
    """The preset's last job (``every_value``: a job holding each swept value and one drawn
    at random, and every job assembled) equals Hydra's composition, and none needed Hydra
    whole. The quick check assembles from the composer the other tests share, whose parts
    test_configs composes for each preset's first job."""
    jobs = preset_jobs(preset)
    if every_value:
        sweep = SweepComposer(hydra_compose, jobs)
        checked = representative_jobs(jobs) + random.Random(preset).sample(jobs, 1)
    else:
        sweep, checked = composer(f"experiment={preset}"), [jobs[-1]]
    whole_before = sweep.composed_whole
    for job in checked:
        assert sweep.resolved(job) == hydras(job), f"{preset}: {job}"
    for job in jobs if every_value else []:
        sweep.resolved(job)
    whole = sweep.composed_whole - whole_before
    assert whole == 0, f"{preset}: {whole} jobs composed whole"


PRESETS = list(read_group("experiment"))


@pytest.mark.parametrize("preset", PRESETS)
def test_each_presets_last_job_is_hydras(preset):
    _equal_to_hydras(preset, every_value=False)


@pytest.mark.slow  # ~3 min: a job per swept value of every preset, composed by Hydra too
@pytest.mark.parametrize("preset", PRESETS)
def test_every_swept_value_of_every_preset_is_composed_as_hydra_composes_it(preset):
    _equal_to_hydras(preset, every_value=True)


def test_an_override_that_reaches_outside_its_key_is_composed_whole():
    """``experiment=`` is a ``@package _global_`` preset: a sweep over presets that set
    other groups (protocols, metrics) is left to Hydra, job by job."""
    jobs = [["experiment=kull_uci", "method=ts"], ["experiment=gupta_ks", "method=ts"]]
    sweep = SweepComposer(hydra_compose, jobs)
    for job in jobs:
        assert sweep.resolved(job) == hydras(job)
    assert sweep.composed_whole == 2


def test_a_value_inside_a_swept_group_is_put_where_hydra_puts_it_or_left_to_hydra():
    """``method.params.seed`` swept beside ``method``: set where the chosen method has the
    key; a key the method lacks is Hydra's to refuse."""
    jobs = [
        [f"method={m}", f"method.params.seed={s}", "experiment=gupta_ks_procedure"]
        for m in ("ms_odir_kull_keras_tuned", "dir_odir_kull_keras_tuned")
        for s in (1, 2)
    ]
    sweep = SweepComposer(hydra_compose, jobs)
    sweep.check(jobs)
    for job in jobs:
        assert sweep.resolved(job) == hydras(job)
    assert sweep.composed_whole == 0
    added = [[f"method={m}", "+method.params.n_bins=7"] for m in ("ts", "histbin_uniform_prior")]
    sweep = SweepComposer(hydra_compose, added)
    assert sweep.resolved(added[0]) == hydras(added[0])  # ts has no n_bins: added
    with pytest.raises(Exception, match="n_bins"):
        sweep.check(added)  # the histogram has one: Hydra's "Could not append"


def test_interpolations_follow_the_swept_values_they_name():
    """``random_state: ${seed}`` in the forest's YAML follows a swept seed."""
    jobs = [[f"seed={s}", f"method={m}"] for s in (3, 4) for m in ("forest", "ts")]
    sweep = SweepComposer(hydra_compose, jobs)
    for job in jobs:
        config, choices = sweep.resolved(job)
        assert (config, choices) == hydras(job)
    assert sweep.resolved(["seed=4", "method=forest"])[0]["method"]["params"]["random_state"] == 4
    assert resolve({"a": 2, "b": "${a}", "c": "x/${a}/${a}"}) == {"a": 2, "b": 2, "c": "x/2/2"}


def test_a_bad_value_fails_when_the_composer_checks_the_sweep():
    from hydra.errors import ConfigCompositionException, MissingConfigException

    jobs = [["method=ts"], ["method=no_such_method"]]
    with pytest.raises(MissingConfigException, match="no_such_method"):
        SweepComposer(hydra_compose, jobs).check(jobs)
    jobs = [["seed=1"], ["no_such_key=1"]]
    with pytest.raises(ConfigCompositionException, match="no_such_key"):
        SweepComposer(hydra_compose, jobs).check(jobs)
