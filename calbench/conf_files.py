"""The packaged config files (``calbench/conf``) and YAML reading: one home for both.

A ground module: data, tables, the runner and the CLI read config groups through it.
"""

from __future__ import annotations

import copy
import functools
from importlib import resources

from calbench.errors import CalbenchError
from calbench.packs import pack_files
from calbench.yaml_text import load_yaml


def group_files(group: str) -> dict[str, object]:
    """A config group's YAML files by option name (``group_files("experiment")["kull_uci"]``),
    the library's (``calbench/conf``) and every paper pack's (`calbench.packs`), as Hydra's
    search path sees them, sorted by name; values are importlib resources or paths
    (``.read_text()``). An option name is one file: a pack that repeats one is an error."""
    sources = [("calbench/conf", resources.files("calbench.conf").joinpath(group))]
    sources += [(f"paper pack {pack.name}", folder) for pack, folder in pack_files(f"conf/{group}")]
    files, owner = {}, {}
    for source, folder in sources:
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            if not entry.name.endswith(".yaml"):
                continue
            name = entry.name[: -len(".yaml")]
            if name in files:
                raise CalbenchError(
                    f"{group}={name} is defined twice: in {owner[name]} and in {source}; "
                    "an option name must be unique, so rename one file."
                )
            files[name], owner[name] = entry, source
    return dict(sorted(files.items()))


def read_group(group: str) -> dict[str, dict]:
    """Every option of a config group, parsed, by name."""
    return {name: load_yaml(entry.read_text()) or {} for name, entry in group_files(group).items()}


def root_config() -> dict:
    """The packaged ``config.yaml``, parsed once per process (`make_calibrator` reads its
    seed on every call: 1.3 ms a parse, a tenth of a CIFAR-10 TS fit), as a fresh copy."""
    return copy.deepcopy(_root_config())


@functools.cache
def _root_config() -> dict:
    return load_yaml(resources.files("calbench.conf").joinpath("config.yaml").read_text())


def swept_values(config: dict, key: str) -> list[str]:
    """The values an experiment config sweeps ``key`` over (``hydra.sweeper.params``), read
    by Hydra's own override grammar, as its sweeper reads them: ``a,b,c`` and also
    ``range(15,55)``, ``choice(...)``."""
    params = ((config.get("hydra") or {}).get("sweeper") or {}).get("params") or {}
    value = params.get(key)
    if value is None or str(value).strip() == "":
        return []
    override = _override_parser().parse_override(f"{key}={value}")
    if override.is_sweep_override():
        return list(override.sweep_string_iterator())
    return [override.get_value_element_as_str()]


def parses(arg: str) -> bool:
    """Whether Hydra's override grammar reads ``arg``."""
    try:
        _override_parser().parse_override(arg)
    except Exception:  # the grammar's own error, which names no fix
        return False
    return True


def override_values(arg: str) -> tuple[str | None, list[str] | None]:
    """(key, its values as strings) of a command-line override (``method=ts,vs`` ->
    ``("method", ["ts", "vs"])``, Hydra's prefixes ``+``, ``++`` and ``~`` dropped); the
    values are None where Hydra's grammar would read them otherwise (an interpolation, a
    function it evaluates later), and the key None for what is no override (``-m``)."""
    if arg.startswith("-") or "=" not in arg:
        return None, None
    try:
        override = _override_parser().parse_override(arg)
    except Exception:  # Hydra reports the bad override itself, with its grammar's words
        return None, None
    key = override.key_or_group
    try:
        if override.is_sweep_override():
            return key, [str(v) for v in override.sweep_string_iterator()]
        return key, [override.get_value_element_as_str()]
    except Exception:
        return key, None


@functools.cache
def _override_parser():
    # Hydra's ANTLR grammar: imported on first use, as the data and table modules that
    # read sweeps need not load it otherwise.
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def metric_sets() -> dict[str, dict[str, dict]]:
    """Each metrics config (``conf/metrics``) as output name -> options, Hydra's
    ``defaults`` list left out."""
    return {
        name: {k: v or {} for k, v in config.items() if k != "defaults"}
        for name, config in read_group("metrics").items()
    }
