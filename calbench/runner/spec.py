"""A job's configuration, resolved once into a plain record that the runner passes down.

Hydra composes a `DictConfig`; `CellSpec.of` resolves its interpolations once
(``${data_dir}`` and the like) and keeps each config group as a plain dict, so nothing
below the job touches OmegaConf. The groups keep their YAML's shape: their keys differ per
choice (a loader's options, a protocol's folds), and each is checked where it is read.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from omegaconf import DictConfig, OmegaConf

#: The parts of the configuration that determine a cell's numbers (and so its hash).
CELL_KEYS = (
    "experiment",
    "seed",
    "dataset",
    "method",
    "criterion",
    "loss",
    "shift",
    "protocol",
    "metrics",
)


@dataclass(frozen=True)
class CellSpec:
    """What one ``calbench run`` cell computes (`CELL_KEYS`) and where (``device``)."""

    experiment: str
    seed: int
    dataset: dict
    method: dict
    criterion: dict
    loss: dict
    shift: dict
    protocol: dict
    metrics: dict
    device: str = "cpu"
    #: Keys of the run config outside `CELL_KEYS` (results_dir, force, ...), as given.
    run: dict = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, cfg: DictConfig | dict | CellSpec) -> CellSpec:
        """The record of a composed config, or of one already resolved into plain
        containers (calbench's launcher composes those); a record is returned as it is."""
        if isinstance(cfg, CellSpec):
            return cfg
        if isinstance(cfg, DictConfig):
            resolved = OmegaConf.to_container(cfg, resolve=True)  # the runner's one resolution
        else:
            resolved = dict(cfg)
        cell = {key: resolved.pop(key) for key in CELL_KEYS}
        own_name = resolved.pop("experiment_name", None)
        if own_name is not None:
            cell["experiment"] = check_experiment_name(own_name)
        return cls(**cell, device=resolved.pop("device", "cpu") or "cpu", run=resolved)

    def groups(self) -> dict:
        """The `CELL_KEYS` groups as one dict (what a cell's hash is taken of)."""
        return copy.deepcopy({key: getattr(self, key) for key in CELL_KEYS})


def check_experiment_name(name) -> str:
    """``experiment_name``: a name a file and a table can carry (letters, digits, ``_``,
    ``-``, ``.``), not a preset's (whose cells it would mix with)."""
    import re

    from calbench.conf_files import group_files
    from calbench.errors import CalbenchError

    text = str(name)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", text):
        raise CalbenchError(
            f"experiment_name={name!r}: use letters, digits, '_', '-' and '.', starting with "
            "a letter or digit (it names files and tables)."
        )
    if text in group_files("experiment"):
        raise CalbenchError(
            f"experiment_name={text} is a preset's name; run the preset as experiment={text}, "
            "or give your runs a name of their own."
        )
    return text
