"""A sweep's job configurations, each distinct part composed by Hydra once.

Hydra composes a job from scratch: it reads every YAML of the defaults list again and
builds an OmegaConf tree, about 0.17 s a job, which a 30,000-cell sweep pays for hours.
The jobs of a sweep differ only in their swept overrides, so `SweepComposer` composes
the overrides every job shares once (the base) and, for each distinct swept override,
the base plus that override once. Where an override changes nothing outside its own key
(``method=ts`` rewrites ``method``, ``seed=3`` rewrites ``seed``), a job is the base with
the parts of its overrides put in: config-group choices first, then values, as Hydra
applies them. Everything else -- an override that reaches outside its key (a
``@package _global_`` preset), two swept overrides on overlapping keys, an interpolation
that is more than a path (``${now:...}``) -- is composed by Hydra itself, whole.
``tests/runner/test_sweep_composer.py`` checks the result against Hydra's own for every preset and
swept value.
"""

# No `from __future__ import annotations`: Hydra's plugin scan executes this module without
# registering it in sys.modules, where a dataclass's string annotations cannot be resolved.

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

#: ``${a.b}``: an interpolation that names a node by its absolute path.
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)\}")


class _NotSeparable(Exception):
    """The job needs Hydra's own composition."""


@dataclass(frozen=True)
class _Part:
    """What one swept override does to the base: the value it leaves at ``path``
    (``missing``: it removes the key), the config-group choices it changes, and how
    Hydra applies it: ``group`` (a config-group choice), or a value override that sets an
    existing key (``set``), adds a new one (``+``, ``add``) or does either (``++``,
    ``force``)."""

    path: tuple[str, ...]
    value: object
    missing: bool
    choices: dict
    kind: str


def _split(config: DictConfig) -> tuple[dict, dict]:
    """(the job's tree without ``hydra``, unresolved; its config-group choices)."""
    tree = OmegaConf.to_container(config, resolve=False)
    hydra = tree.pop("hydra", None) or {}
    return tree, dict((hydra.get("runtime") or {}).get("choices") or {})


def as_cell_config(config: DictConfig) -> tuple[dict, dict]:
    """Hydra's composed config as a cell gets it: (resolved, without ``hydra``; its
    config-group choices)."""
    choices = OmegaConf.to_container(config.hydra.runtime.choices)
    config = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"])
    return OmegaConf.to_container(config, resolve=True), choices


def _differences(a, b, path=()):
    """The paths at which two plain trees differ (a dict key on one side only counts)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() | b.keys():
            if key not in a or key not in b:
                yield (*path, key)
            else:
                yield from _differences(a[key], b[key], (*path, key))
    elif type(a) is not type(b) or a != b:
        yield path


def _at(tree, path):
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None, True
        tree = tree[key]
    return tree, False


def _with(tree: dict, path: tuple, value, missing: bool) -> dict:
    """``tree`` with ``value`` at ``path`` (removed where ``missing``); the dicts along the
    path are copied, the rest is shared."""
    head, rest = path[0], path[1:]
    out = dict(tree)
    if not rest:
        if missing:
            out.pop(head, None)
        else:
            out[head] = value
        return out
    child = out.get(head)
    if not isinstance(child, dict):
        raise _NotSeparable  # Hydra would refuse or replace: let it say which
    out[head] = _with(child, rest, value, missing)
    return out


def _overlap(a: tuple, b: tuple) -> bool:
    return a[: len(b)] == b[: len(a)]


def resolve(tree: dict) -> dict:
    """``tree`` with its path interpolations (``${seed}``, ``${data_dir}/x``) resolved as
    OmegaConf resolves them, in new containers; anything else raises `_NotSeparable`."""

    def value(node, depth):
        if depth > 32:
            raise _NotSeparable  # a cycle: OmegaConf's error, not ours
        if isinstance(node, dict):
            return {k: value(v, depth) for k, v in node.items()}
        if isinstance(node, list):
            return [value(v, depth) for v in node]
        if not isinstance(node, str) or "${" not in node:
            return node
        whole = _INTERPOLATION.fullmatch(node)
        if whole:
            return target(whole.group(1), depth)
        if "\\" in node or "${" in _INTERPOLATION.sub("", node):
            raise _NotSeparable  # resolvers, escapes, nested or relative interpolations
        return _INTERPOLATION.sub(lambda m: _as_text(target(m.group(1), depth)), node)

    def target(dotted, depth):
        found, missing = _at(tree, tuple(dotted.split(".")))
        if missing:
            raise _NotSeparable  # OmegaConf's error, not ours
        return value(found, depth + 1)  # a node named whole comes as a copy, resolved

    return value(tree, 0)


def _as_text(value) -> str:
    if value is None or isinstance(value, dict | list):
        raise _NotSeparable  # OmegaConf writes these its own way
    return str(value)


def _kind(parsed, choices: dict) -> str:
    if parsed.key_or_group in choices:
        return "group"
    return "add" if parsed.is_add() else "force" if parsed.is_force_add() else "set"


def _applies(part: _Part, tree: dict) -> bool:
    """Whether Hydra would put ``part``'s value into ``tree`` as it stands: a plain value
    only (a dict would merge with what is there), at a key that exists for ``key=v``, that
    does not for ``+key=v``."""
    if part.missing or isinstance(part.value, dict | list):
        return False
    current, absent = _at(tree, part.path)
    if isinstance(current, dict | list):
        return False  # OmegaConf would merge into it, or refuse
    if part.kind == "set":
        return not absent
    return part.kind == "force" or absent or current is None


class SweepComposer:
    """The jobs of one sweep batch, composed as Hydra composes them (see the module
    docstring). ``compose(overrides)`` is Hydra's composition of one job's overrides, its
    ``hydra`` node included (the launcher's ``config_loader.load_sweep_config``)."""

    def __init__(self, compose: Callable[[list[str]], DictConfig], jobs: Sequence[Sequence[str]]):
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self._compose, self._parser = compose, OverridesParser.create()
        first = list(jobs[0]) if jobs else []
        self.common = [o for o in first if all(o in job for job in jobs)]
        self._common_keys = {self._parser.parse_override(o).key_or_group for o in self.common}
        self.base = _split(compose(self.common))
        self._parts: dict[str, _Part | None] = {}
        self._whole: dict[tuple, tuple[dict, dict]] = {}
        #: Jobs Hydra composed whole (each distinct one once).
        self.composed_whole = 0

    def check(self, jobs: Sequence[Sequence[str]]) -> None:
        """Compose every distinct swept config-group choice once, and a job holding each
        distinct swept value, so that a bad name or key fails before any job runs
        (Hydra's error, as its basic sweeper gives it)."""
        from hydra_plugins.calbench_sweeper.calbench_sweeper import representative_jobs

        for job in representative_jobs(jobs):
            self.resolved(job)

    def _part(self, override: str) -> _Part | None:
        if override not in self._parts:
            self._parts[override] = self._new_part(self._parser.parse_override(override))
        return self._parts[override]

    def _new_part(self, parsed) -> _Part | None:
        if (
            parsed.is_delete()
            or parsed.package is not None
            or parsed.is_hydra_override()
            or parsed.key_or_group in self._common_keys
        ):
            return None
        path = tuple(parsed.key_or_group.replace("/", ".").split("."))
        kind = _kind(parsed, self.base[1])
        value = parsed.value()
        if kind == "set" and not isinstance(value, dict | list):
            # A plain value lands where its key says (`_applies` checks the key per job).
            # ``+key`` is composed below: it may append a config group, not a value.
            return _Part(path, value, False, {}, kind)
        try:
            tree, choices = _split(self._compose([*self.common, parsed.input_line]))
        except Exception:  # noqa: BLE001 - Hydra says why when the job is composed whole
            return None
        base_tree, base_choices = self.base
        if not all(p[: len(path)] == path for p in _differences(base_tree, tree)):
            return None  # it reaches outside its key (a @package _global_ preset)
        if not set(base_choices) <= set(choices):
            return None
        value, missing = _at(tree, path)
        changed = {k: v for k, v in choices.items() if base_choices.get(k) != v}
        return _Part(path, value, missing, changed, kind)

    def resolved(self, overrides: Sequence[str]) -> tuple[dict, dict]:
        """(the job's config without ``hydra``, interpolations resolved; its choices)."""
        key = tuple(overrides)
        if key in self._whole:
            return self._whole[key]
        try:
            tree, choices = self._assembled(overrides)
            return resolve(tree), choices
        except _NotSeparable:
            self.composed_whole += 1
            self._whole[key] = as_cell_config(self._compose(list(overrides)))
            return self._whole[key]

    def unresolved(self, overrides: Sequence[str]) -> dict:
        """The job's config before its interpolations are resolved, in a tenth of the time
        (what a sweep's estimate of each cell's cost reads; the tree is shared with other
        jobs: read it, do not change it)."""
        try:
            return self._assembled(overrides)[0]
        except _NotSeparable:
            return self.resolved(overrides)[0]

    def _assembled(self, overrides) -> tuple[dict, dict]:
        if not set(self.common) <= set(overrides):
            raise _NotSeparable  # the base has an override this job lacks
        parts = [self._part(o) for o in overrides if o not in self.common]
        if any(p is None for p in parts):
            raise _NotSeparable
        groups = [p for p in parts if p.kind == "group"]
        values = [p for p in parts if p.kind != "group"]
        for some in (groups, values):
            paths = [p.path for p in some]
            if any(_overlap(a, b) for i, a in enumerate(paths) for b in paths[i + 1 :]):
                raise _NotSeparable  # order would matter: Hydra's order, Hydra's merge
        tree, choices = self.base
        choices = dict(choices)
        # Config-group choices before values, as Hydra applies them.
        for part in groups:
            tree = _with(tree, part.path, part.value, part.missing)
            choices.update(part.choices)
        for part in values:
            if not _applies(part, tree):
                raise _NotSeparable  # Hydra's to refuse (or to merge)
            tree = _with(tree, part.path, part.value, part.missing)
        return tree, choices
