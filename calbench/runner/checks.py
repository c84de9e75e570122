"""Checks of a run's configuration before any work: one clear error per mistake.

Hydra already refuses a config name that names no file in a required group; these are the
mistakes it lets through: a preset name that names no file (``experiment`` is an optional
group, so a typo silently ran the default cell), keys added with ``+`` that nothing reads,
grid values of the wrong type or sign, a parameter both fixed and searched, a seed that is
not an integer.
"""

from __future__ import annotations

import numbers

from sklearn.base import clone

from calbench.calibrators import make_calibrator
from calbench.conf_files import group_files, root_config
from calbench.errors import CalbenchError, nearest
from calbench.runner.spec import CELL_KEYS, CellSpec

#: The keys of a method config (`calbench.runner.plan.CellPlan` reads ``tuned`` and
#: ``average_inner_models``, which overrides the protocol's).
METHOD_KEYS = ("name", "calibrator", "params", "grid", "tuned", "average_inner_models")


def run_keys() -> list[str]:
    """The keys of a run's config: config.yaml's own, its groups' and Hydra's."""
    config = root_config()
    groups = [next(iter(d)) for d in config["defaults"] if isinstance(d, dict)]
    return (
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
            f"the presets are: {', '.join(presets())}."
        )


def _unknown(keys, known, where: str) -> None:
    extra = [k for k in keys if k not in known]
    if extra:
        key = extra[0]
        raise CalbenchError(
            f"unknown config key {where}{key}{nearest(key, known)}: nothing reads it. "
            f"The keys{' of ' + where.rstrip('.') if where else ''} are: {', '.join(known)}."
        )


def method_grid(method: dict) -> dict[str, list]:
    """The method's grid with each value a list: a scalar is a one-point grid (the natural
    ``method.grid.n_neighbors=64``); an empty list is an error."""
    grid = {}
    for key, values in (method.get("grid") or {}).items():
        values = list(values) if isinstance(values, list | tuple) else [values]
        if not values:
            raise CalbenchError(
                f"method {method.get('name')!r}: method.grid.{key} is empty; give at least "
                f"one value (method.grid.{key}=[v1,v2]) or remove it from the grid."
            )
        grid[key] = values
    return grid


def checked_method(method: dict) -> tuple:
    """The calibrator of a method config (its fixed params set, never fitted) and its grid
    (`method_grid`), after checking the config's keys, its fixed and tuned params and every
    grid value against the calibrator's parameters and their constraints."""
    _unknown(list(method), METHOD_KEYS, "method.")
    params = dict(method.get("params") or {})
    calibrator = make_calibrator(method["calibrator"], **params)  # unknown params: its error
    calibrator.validate_params()
    for dataset_name, tuned in (method.get("tuned") or {}).items():
        try:
            clone(calibrator).set_params(**tuned).validate_params()
        except ValueError as exc:  # CalbenchError, or scikit-learn's for an unknown name
            raise CalbenchError(f"method {method['name']!r}, tuned.{dataset_name}: {exc}") from None
    grid = method_grid(method)
    accepted = calibrator.get_params()
    unknown = sorted(set(grid) - set(accepted))
    if unknown:
        raise CalbenchError(
            f"method {method['name']!r}: grid names unknown parameter(s) {unknown}; "
            f"the calibrator takes {sorted(accepted)}."
        )
    for key, values in grid.items():
        if key in params:
            raise CalbenchError(
                f"method {method['name']!r}: {key!r} is both fixed (method.params.{key}="
                f"{params[key]}) and searched (method.grid.{key}={values}); the grid would "
                f"override it. Fix it with method.grid.{key}=[{params[key]}], or drop the param."
            )
        for value in values:
            clone(calibrator).set_params(**{key: value}).validate_params()
    return calibrator, grid


def check_run_config(spec: CellSpec) -> None:
    """The run's keys and seed (`calbench.runner.plan.plan_cell` runs it, and
    `checked_method` on its method)."""
    _unknown([*CELL_KEYS, "device", *spec.run], run_keys(), "")
    if isinstance(spec.seed, bool) or not isinstance(spec.seed, numbers.Integral):
        raise CalbenchError(f"seed must be an integer; got seed={spec.seed!r}.")
    if not 0 <= spec.seed < 2**63:  # numpy seeds generators with non-negative integers
        raise CalbenchError(
            f"seed must be a non-negative integer below 2**63; got seed={spec.seed}."
        )
