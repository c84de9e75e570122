"""Methods: the named variants under ``conf/method`` (a registered calibrator, the parameters
it fixes, the grid the protocol searches), read by the command line (``method=NAME``) and by
Python (``make_calibrator(NAME)``, ``method(NAME)``) alike, so a name means one thing.

``method_from_config`` is the one place a method config becomes a calibrator and its grid,
every value checked against the calibrator's declared parameter constraints.
"""

from __future__ import annotations

import functools
import math
from numbers import Number as numbers_types

from sklearn.base import clone

from calbench.calibrators.registry import registered_calibrator
from calbench.conf_files import group_files, read_group, root_config
from calbench.errors import CalbenchError, nearest
from calbench.packs import paper_packs

#: The keys of a method config (`calbench.runner.plan.CellPlan` reads ``tuned`` and
#: ``average_inner_models``, which overrides the protocol's).
METHOD_KEYS = ("name", "calibrator", "params", "grid", "tuned", "average_inner_models")


def method_configs() -> dict[str, dict]:
    """Every method config by name (``conf/method/NAME.yaml``, the library's and the paper
    packs'), as written; read once per set of packs."""
    return _method_configs(tuple(paper_packs()))


@functools.cache
def _method_configs(_packs: tuple) -> dict[str, dict]:
    configs = read_group("method")
    files = group_files("method")
    for name, config in configs.items():
        _check_method_file(files[name], name, config)
    return configs


def _check_method_file(path, stem: str, config: dict) -> None:
    """A method YAML (a pack's, above all) names a calibrator and carries its file's name:
    a typo'd key crashed `calbench list methods` with a KeyError, and two files with one
    ``name:`` were stored as one method, one cell said to supersede the other."""
    extra = [k for k in config if k not in METHOD_KEYS]
    if extra:
        raise CalbenchError(
            f"{path}: unknown key {extra[0]!r}{nearest(extra[0], METHOD_KEYS)}; the keys of "
            f"a method are: {', '.join(METHOD_KEYS)}."
        )
    if not config.get("calibrator"):
        raise CalbenchError(
            f"{path}: no calibrator: name a registered calibrator (`calbench list "
            "calibrators`) or your class as module:Class."
        )
    if config.get("name") != stem:
        raise CalbenchError(
            f"{path}: name: {config.get('name')} is not the file's name; a method is named "
            f"by its file, so write name: {stem} (or rename the file)."
        )


def bounded_variant(method: dict) -> str | None:
    """The first method of the same calibrator that sets a pseudo-count bound
    (`calbench.calibrators.bounds`), if ``method`` has none."""
    if (method.get("params") or {}).get("pseudo_count"):
        return None
    for name, other in method_configs().items():
        if other["calibrator"] == method["calibrator"] and (other.get("params") or {}).get(
            "pseudo_count"
        ):
            return name
    return None


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


def method_from_config(method: dict) -> tuple:
    """The calibrator of a method config (its fixed params set, never fitted) and its grid
    (`method_grid`), after checking the config's keys, its fixed and tuned params and every
    grid value against the calibrator's parameters and their constraints."""
    extra = [k for k in method if k not in METHOD_KEYS]
    if extra:
        raise CalbenchError(
            f"unknown config key method.{extra[0]}{nearest(extra[0], METHOD_KEYS)}: nothing "
            f"reads it. The keys of method are: {', '.join(METHOD_KEYS)}."
        )
    params = dict(method.get("params") or {})
    for key, value in params.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise CalbenchError(
                f"method {method.get('name')!r}: method.params.{key}={value}; a parameter is a "
                "finite number, a name, true or false."
            )
    calibrator = registered_calibrator(method["calibrator"], **params)  # unknown: its error
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
        for value in values:  # a declared constraint's words first, then what none allows
            clone(calibrator).set_params(**{key: value}).validate_params()
        _check_grid_values(method["name"], key, values, calibrator)
    return calibrator, grid


def _check_grid_values(name, key: str, values: list, calibrator) -> None:
    """What no grid means, whether or not the calibrator declares a constraint for ``key``
    (a researcher's own class often declares none): NaN or infinity as a grid point, or
    numbers and text in one grid (``[0.5,abc]``: a typo, which her class would meet as a
    string in its arithmetic)."""
    for value in values:
        if isinstance(value, float) and not math.isfinite(value):
            raise CalbenchError(
                f"method {name!r}: method.grid.{key} holds {value}; a grid point is a "
                "finite number, a name, true or false."
            )
    declared = key in getattr(calibrator, "_parameter_constraints", {})
    numbers = [v for v in values if isinstance(v, numbers_types) and not isinstance(v, bool)]
    texts = [v for v in values if isinstance(v, str)]
    if numbers and texts and not declared:
        raise CalbenchError(
            f"method {name!r}: method.grid.{key}={values} mixes numbers and text "
            f"({texts[0]!r}); give numbers only, e.g. method.grid.{key}=[{numbers[0]},...]."
        )


def method(name: str, dataset: str | None = None, run_seed: int | None = None, **params) -> tuple:
    """(calibrator, grid) of ``method=NAME`` as a run builds them: its fixed parameters,
    then ``params`` (a parameter set here is no longer searched); ``dataset`` picks the
    parameters a ``tuned`` method was given for it; ``run_seed`` fills ``${seed}`` (the run's
    default otherwise). `calbench.runner.selection.select_and_fit` searches the grid as the
    protocol does. ``module:Class``, your own class, as ``make_calibrator`` makes it: with
    ``params``, and no grid (``method.calibrator=module:Class`` on the command line)."""
    return method_from_config(
        _own_class(name, dataset, params)
        if ":" in name and name not in method_configs()
        else _named(name, dataset, run_seed, params)
    )


def _own_class(name: str, dataset, params: dict) -> dict:
    """``module:Class``'s method config: the class with ``params``, no grid."""
    if dataset is not None:
        raise CalbenchError(f"{name} has no per-data-set parameters; drop dataset=.")
    return {"name": name, "calibrator": name, "params": params}


def _named(name: str, dataset, run_seed, params: dict) -> dict:
    """Method ``name``'s config as `method` builds it (its docstring)."""
    if name not in method_configs():
        raise CalbenchError(
            f"Unknown method {name!r}{nearest(name, method_configs())}; "
            "`calbench list methods` lists them."
        )
    config = dict(method_configs()[name])
    seed = root_config()["seed"] if run_seed is None else run_seed
    fixed = {k: seed if v == "${seed}" else v for k, v in (config.get("params") or {}).items()}
    tuned = config.pop("tuned", None) or {}
    if dataset is not None or tuned:
        if dataset not in tuned:
            raise CalbenchError(
                f"method {name!r} takes the parameters chosen for each data set "
                f"({', '.join(tuned)}): method({name!r}, dataset=...) names one."
                if tuned
                else f"method {name!r} is the same on every data set; drop dataset=."
            )
        params = {**tuned[dataset], **params}
    config["params"] = {**fixed, **params}
    config["grid"] = {k: v for k, v in (config.get("grid") or {}).items() if k not in params}
    config.pop("average_inner_models", None)  # a protocol matter, not the calibrator's
    return config
