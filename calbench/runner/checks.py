"""Checks of a run's configuration before any work: one clear error per mistake.

Hydra already refuses a config name that names no file in a required group; these are the
mistakes it lets through: a preset name that names no file (``experiment`` is an optional
group, so a typo silently ran the default cell), keys added with ``+`` that nothing reads,
grid values of the wrong type or sign, a parameter both fixed and searched, a seed that is
not an integer.
"""

from __future__ import annotations

import functools
import numbers

from calbench.conf_files import group_files, root_config
from calbench.data.identity import FILE_OPTIONS, user_files_name
from calbench.errors import CalbenchError, nearest
from calbench.runner.cell_identity import CELL_KEYS
from calbench.runner.spec import CellSpec
from calbench.validation import check_name


@functools.cache
def run_keys() -> tuple[str, ...]:
    """The keys of a run's config: config.yaml's own, its groups' and Hydra's (read once a
    process: every cell of a sweep checks against them)."""
    config = root_config()
    groups = [next(iter(d)) for d in config["defaults"] if isinstance(d, dict)]
    return tuple(
        [g for g in groups if "/" not in g and not g.startswith("override")]
        + [k for k in config if k != "defaults"]
        + ["experiment"]
    )


def presets() -> list[str]:
    return list(group_files("experiment"))


def check_experiment_choice(choice) -> None:
    """``experiment=NAME`` must name a preset (Hydra skips a missing optional one)."""
    if choice is not None and choice not in presets():
        raise CalbenchError(
            f"experiment={choice} names no preset{nearest(choice, presets())}; "
            f"the presets are: {', '.join(presets())}. To name your own runs, use "
            f"experiment_name={choice}."
        )


def _unknown(keys, known, where: str) -> None:
    extra = [k for k in keys if k not in known]
    if extra:
        key = extra[0]
        raise CalbenchError(
            f"unknown config key {where}{key}{nearest(key, known)}: nothing reads it. "
            f"The keys{' of ' + where.rstrip('.') if where else ''} are: {', '.join(known)}."
        )


def check_run_config(spec: CellSpec) -> None:
    """The run's keys and seed (`calbench.runner.plan.plan_cell` runs it, and
    `calbench.calibrators.methods.method_from_config` on its method)."""
    _unknown([*CELL_KEYS, "device", *spec.run], run_keys(), "")
    _check_seed("seed", spec.seed)
    for group in ("dataset", "protocol"):  # a group's own seed (e.g. dataset.seed=3)
        config = getattr(spec, group)
        if "seed" in config:
            _check_seed(f"{group}.seed", config["seed"])
    check_dataset_name(spec.dataset)
    check_method_name(spec.method)
    check_experiment_name(spec.run.get("experiment_name"))


def check_experiment_name(name) -> None:
    """``experiment_name``: a name a file and a table can carry (`check_name`), not a
    preset's (whose cells it would mix with)."""
    if name is None:
        return
    check_name(name, "experiment_name", "give your runs a name like experiment_name=my_runs")
    if str(name) in presets():
        raise CalbenchError(
            f"experiment_name={name} is a preset's name; run the preset as experiment={name}, "
            "or give your runs a name of their own."
        )


def check_dataset_name(dataset: dict) -> None:
    """A data set's name labels rows and names table and figure files: ``dataset.name``,
    or the stem of the user's file it defaults to."""
    if dataset.get("name") is not None:
        check_name(dataset["name"], "dataset.name", "e.g. dataset.name=my_resnet")
    elif dataset.get("loader") in FILE_OPTIONS and all(
        dataset.get(k) not in (None, "", "???") for k in FILE_OPTIONS[dataset["loader"]]
    ):
        check_name(
            user_files_name(dataset),
            "the data set name taken from the file's stem",
            "name it with dataset.name=my_model",
        )


def check_method_name(method: dict) -> None:
    """A method's name labels rows and columns and names figure files, and a method's name
    means one calibrator: ``method.calibrator=my_module:MyClass`` without ``method.name``
    would keep the chosen method's name (the default's ``ts``) and store her class's
    numbers as that method's, where every later run of it would meet them."""
    name = method.get("name")
    if name is None:
        return
    check_name(name, "method.name", "e.g. method.name=my_method")
    from calbench.calibrators.methods import method_configs

    known = method_configs().get(str(name))
    if known is not None and str(method.get("calibrator")) != str(known["calibrator"]):
        own = str(method.get("calibrator")).rpartition(":")[2].lower() or "method"
        own = f"my_{own}" if own in method_configs() else own  # (vs would meet vs's cells)
        raise CalbenchError(
            f"method.calibrator={method.get('calibrator')} replaces the calibrator of "
            f"method {name!r} (calibrator {known['calibrator']}) but keeps its name, so its "
            f"numbers would be stored and ranked as {name}'s. Name your method: "
            f"method.name={own}."
        )


def _check_seed(key: str, seed) -> None:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise CalbenchError(f"{key} must be an integer; got {key}={seed!r}.")
    if not 0 <= seed < 2**63:  # numpy seeds generators with non-negative integers
        raise CalbenchError(f"{key} must be a non-negative integer below 2**63; got {key}={seed}.")
