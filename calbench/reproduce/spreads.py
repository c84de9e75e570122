"""The procedure twins' spreads: the values a paper's own fitting procedure gives over its
seeds or folds, run in calbench, which verify a stated cause when they hold the printed
number (`procedure_spreads`), and what verifying one costs (`verify_hint`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from calbench.conf_files import group_files, read_group, swept_values
from calbench.packs import paper_packs
from calbench.results.experiment import Results

#: What a procedure's cells may differ in: its seed, the fold whose model predicts (an
#: authors' cross-validation), the float32 arithmetic its fit ran in (CalArena's SMS:
#: `calbench.papers.calarena2026.pinned_arithmetic.ARITHMETICS`), or where in the interval
#: his TS's stopping test accepts the temperature lies (Valk's TS+forest,
#: `reference_valk.accepted_temperature`).
DRAWN = ("seed", "fold", "arithmetic", "ts_stop")


@dataclass(frozen=True)
class Spread:
    """A procedure method's outcomes for one (dataset, metric): one value per draw (seed or
    fold, `DRAWN`)."""

    values: tuple[float, ...]
    draws: tuple
    cells: tuple[str, ...]
    drawn: str = "seed"

    @property
    def deterministic(self) -> bool:
        """One cell of a procedure without a seed or fold."""
        return self.draws == (None,)

    def describe(self, scale: float, decimals: int) -> str:
        low, high = min(self.values) * scale, max(self.values) * scale
        if self.deterministic:
            return f"{low:.{decimals}f} (deterministic: one cell)"
        draws = _draw_list(self.draws)
        return (
            f"{low:.{decimals}f} to {high:.{decimals}f} over {len(self.values)} "
            f"{self.drawn}s ({draws})"
        )

    def place(self, printed: float, scale: float, half_unit: float) -> tuple[int, int, int]:
        """How many draws fall below the printed number, round to it (within ``half_unit``:
        half a printed unit, plus the tolerance a rule states for the number) and fall above
        it."""
        values = np.asarray(self.values) * scale
        slack = half_unit * (1 + 1e-9)
        below = int((values < printed - slack).sum())
        above = int((values > printed + slack).sum())
        return below, len(values) - below - above, above

    def holds(self, printed: float, scale: float, half_unit: float) -> bool:
        """The printed number lies inside the spread widened by ``half_unit`` (half a printed
        unit, plus the number's stated tolerance)."""
        below, _, above = self.place(printed, scale, half_unit)
        return below < len(self.values) and above < len(self.values)

    def describe_place(self, printed: float, scale: float, half_unit: float) -> str:
        # A spread of n draws holds one more draw of its procedure with probability
        # (n - 1) / (n + 1) only: a printed number held by one draw at an end of the spread
        # is weaker evidence than one amid the draws, and the reader should see which.
        below, at, above = self.place(printed, scale, half_unit)
        return f"{self.drawn}s below / at / above the printed value: {below} / {at} / {above}"


def _draw_list(draws) -> str:
    """``15 to 34`` for a run of consecutive integers, else the draws one by one."""
    numbers = all(isinstance(d, int) for d in draws)
    if numbers and len(draws) > 2 and list(draws) == list(range(draws[0], draws[-1] + 1)):
        return f"{draws[0]} to {draws[-1]}"
    return ", ".join(str(d) for d in draws)


def _draw_key(draw) -> tuple:
    """Numbers in numeric order (seed 2 before seed 10)."""
    return (0, draw, "") if isinstance(draw, int | float) else (1, 0, str(draw))


def _drawn(params: dict) -> tuple[str, object]:
    """The parameter a procedure's cells differ in, and its value (None: deterministic)."""
    for name in DRAWN:
        if params.get(name) is not None:
            return name, params[name]
    return "seed", None


def procedure_presets(preset: str) -> list[str]:
    """``PRESET_procedure`` and any ``PRESET_procedure_*``: the paper's own fitting
    procedures for ``preset`` that are shipped (several where their sweeps differ: seeds
    swept for some, a seed fixed by the authors' code for others)."""
    names = group_files("experiment")
    twin = f"{preset}_procedure"
    return sorted(n for n in names if n == twin or n.startswith(f"{twin}_"))


def procedure_minutes(twin: str, key: str = "procedure_minutes") -> float | None:
    """Minutes the procedure twin takes on DenseNet-40 CIFAR-10 on 2 cores, as its paper
    pack measured them (``pack.yaml``'s ``procedure_minutes``), for every draw: what
    verifying a cause costs at most (`calbench.reproduce.procedures`). With ``key=
    "preset_minutes"``, a preset's own sweep's minutes."""
    for pack in paper_packs().values():
        minutes = (pack.meta.get(key) or {}).get(twin)
        if minutes is not None:
            return minutes
    return None


@functools.lru_cache(maxsize=256)
def verifying_twin(preset: str, method: str) -> str | None:
    """The procedure twin of ``preset`` whose sweep runs ``method``, if one does."""
    configs = read_group("experiment")
    for twin in procedure_presets(preset):
        if method in swept_values(configs[twin], "method"):
            return twin
    return None


def verify_hint(preset: str, method: str) -> str:
    """How to verify a stated cause: the command, and its cost where it was measured."""
    twin = verifying_twin(preset, method)
    if twin is None:
        return ""
    minutes = procedure_minutes(twin)
    cost = (  # (read as the command's cost, where it stops after a few seeds as a rule)
        f"; at most about {minutes:g} minutes on 2 cores, were every seed needed" if minutes else ""
    )
    return (
        f"Verify with `calbench reproduce {preset}` (it runs {twin} until its spread "
        f"holds the printed number{cost}). "
    )


def configured_draws(preset: str, method: str) -> set[str] | None:
    """The draws (as text) the shipped configs give a procedure method: the values of
    ``method.params.seed`` (or ``.fold``) that the preset's procedure twins sweep it over,
    else its method config's own value ("None": deterministic); None for a method without
    a shipped config (every draw counts). A stored cell of another draw is left from an
    earlier configuration and stays out of the spread."""
    return _configured_draws(preset, method, read_group("method"), read_group("experiment"))


def _configured_draws(preset, method, methods: dict, experiments: dict) -> set[str] | None:
    """`configured_draws` on config groups already read (each read parses every file)."""
    if method not in methods:
        return None
    swept = set()
    for twin in procedure_presets(preset):
        if method in swept_values(experiments[twin], "method"):
            for name in DRAWN:
                swept |= set(swept_values(experiments[twin], f"method.params.{name}"))
    if swept:
        return swept
    return {str(_drawn(methods[method].get("params") or {})[1])}


def procedure_spreads(results_dir, preset: str, methods) -> dict:
    """(dataset, method, metric) -> `Spread` of the stored cells of each procedure method:
    the newest cell of every draw its configs give (``method.params.seed`` or ``.fold``;
    one cell where the method has neither; `configured_draws`)."""
    store = Results.of(results_dir)
    rows = store.rows(preset, latest=False)
    rows = rows[rows["method"].isin(list(methods))]
    if rows.empty:
        return {}
    cells = rows.sort_values("written").drop_duplicates("config_hash", keep="last")
    drawn = {
        h: _drawn((store.config(h).get("method") or {}).get("params") or {})
        for h in cells["config_hash"]
    }
    # As text: a method without a draw (None) must stay a group key, not a dropped NaN.
    cells = cells.assign(method_draw=[str(drawn[h]) for h in cells["config_hash"]])
    groups = read_group("method"), read_group("experiment")
    configured = {m: _configured_draws(preset, m, *groups) for m in cells["method"].unique()}
    pairs = zip(cells["method"], cells["config_hash"], strict=True)
    cells = cells[[configured[m] is None or str(drawn[h][1]) in configured[m] for m, h in pairs]]
    newest = cells.groupby(["dataset", "method", "method_draw"])["config_hash"].last()
    rows = rows[rows["config_hash"].isin(newest)]
    means = rows.groupby(["dataset", "method", "metric", "config_hash"])["value"].mean()
    out = {}
    for (dataset, method, metric), part in means.groupby(level=[0, 1, 2]):
        hashes = [key[3] for key in part.index]
        order = sorted(range(len(hashes)), key=lambda i: _draw_key(drawn[hashes[i]][1]))
        out[(dataset, method, metric)] = Spread(
            tuple(float(part.iloc[i]) for i in order),
            tuple(drawn[hashes[i]][1] for i in order),
            tuple(hashes[i] for i in order),
            drawn[hashes[order[0]]][0],
        )
    return out
