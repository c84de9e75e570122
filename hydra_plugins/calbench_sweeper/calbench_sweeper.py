"""calbench's Hydra sweeper: Hydra's basic sweeper, checked once per swept value.

Before launching, Hydra's basic sweeper composes the configuration of every job of the
sweep to catch a bad override early. Composing takes about a quarter of a second, so the
1540 jobs of kull_uci spent six minutes there before the first job started. A bad value
(a config name that names no file, a key of the wrong type) fails whatever it is combined
with, so composing one job per distinct value of each swept key finds the same errors:
kull_uci composes 38 jobs instead of 1540. The jobs themselves are composed again where
they run, as before; calbench's launcher composes each swept value itself before any job
runs (`hydra_plugins.calbench_launcher.sweep_composer`), and then this check is left to it.

It also expands ``dataset.task=all`` (on the command line or in a preset's sweep) into every
task of the HDF5 file the composed ``dataset.path`` names (`calbench.data.hdf5.expand_all_tasks`),
so a preset runs on the tasks present without listing them.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper, BasicSweeperConf
from hydra.core.config_store import ConfigStore


@dataclass
class CalbenchSweeperConf(BasicSweeperConf):
    _target_: str = "hydra_plugins.calbench_sweeper.calbench_sweeper.CalbenchSweeper"


ConfigStore.instance().store(group="hydra/sweeper", name="calbench", node=CalbenchSweeperConf)


def representative_jobs(batch: Sequence[Sequence[str]]) -> list[Sequence[str]]:
    """The first job of ``batch`` holding each distinct override (``key=value``) of it."""
    seen: set[str] = set()
    chosen = []
    for overrides in batch:
        new = [o for o in overrides if o not in seen]
        if new:
            seen.update(new)
            chosen.append(overrides)
    return chosen


def _expanded(overrides: list[str], config) -> list[str]:
    """`calbench.data.hdf5.expand_all_tasks`, its error one line as calbench's others."""
    import sys

    from calbench.data.hdf5 import expand_all_tasks
    from calbench.errors import CalbenchError

    try:
        return expand_all_tasks(overrides, config)
    except CalbenchError as exc:
        print(f"calbench: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


class CalbenchSweeper(BasicSweeper):
    def _parse_config(self) -> list[str]:
        return _expanded(super()._parse_config(), self.config)

    def sweep(self, arguments: list[str]):
        return super().sweep(_expanded(list(arguments), self.config))

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        if getattr(self.launcher, "checks_every_value", False):
            return
        super().validate_batch_is_legal(representative_jobs(batch))
