"""A job's configuration, resolved once into a plain record that the runner passes down.

Hydra composes a `DictConfig`; `CellSpec.of` resolves its interpolations once
(``${data_dir}`` and the like) and keeps each config group as a plain dict, so nothing
below the job touches OmegaConf. The groups keep their YAML's shape: their keys differ per
choice (a loader's options, a protocol's folds), and each is checked where it is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import DictConfig, OmegaConf

from calbench.runner.cell_identity import CELL_KEYS


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
        if resolved.get("experiment_name") is not None:  # checked by check_run_config
            cell["experiment"] = str(resolved["experiment_name"])
        return cls(**cell, device=resolved.pop("device", "cpu") or "cpu", run=resolved)
