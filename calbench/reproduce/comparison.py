"""Published numbers beside calbench's: one row per printed number, with a status and a cause.

A number is

- ``equal`` when calbench's value, scaled as the paper prints it, rounds to the printed
  digits (within half a unit of the last printed digit);
- ``within tolerance`` when it is off by no more than a tolerance that a rule in a paper
  pack's ``notes.yaml`` (`rules`) states together with its reason (the reference code's
  float32 arithmetic, a value on a rounding boundary, ...);
- ``verified cause`` when it differs, and a rule names a calbench method that follows the
  paper's own procedure (``verify:``), and the printed number lies inside the spread of that
  method's stored cells (one per seed or fold; widened by half a printed unit, since the paper
  rounds) -- the cause is then a fact, run in calbench;
- ``unexplained`` when it differs otherwise: no rule, a rule whose cause has not been run,
  or a procedure whose spread misses the printed number (the row says which);
- ``not run`` when the store holds no such cell (the data set is absent, or the preset has
  not run yet).

Values are the mean over the folds of the newest cell of each data set and method (the
deep-net presets have one fold).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from calbench.conf_files import group_files, read_group, swept_values
from calbench.packs import pack_entries, paper_packs
from calbench.reproduce.published import not_reproducible, published
from calbench.runner.store import ResultStore
from calbench.stats.bootstrap import stored_bootstrap

STATUSES = (
    "equal",
    "within tolerance",
    "verified cause",
    "cause not verified",
    "unexplained",
    "not run",
)
#: "cause not verified": a cause is stated and the procedure that would verify it is
#: shipped, but its twin has not run here (`calbench reproduce PRESET --procedures`).
DIFFERS = ("verified cause", "cause not verified", "unexplained")
REPORT_COLUMNS = [
    "paper",
    "table",
    "dataset",
    "column",
    "method",
    "metric",
    "published",
    "calbench",
    "delta",
    "status",
    "procedure",
    "note",
    "cells",
]
_RULE_KEYS = ("paper", "table", "dataset", "method", "metric")


@dataclass(frozen=True)
class Rule:
    """What is known about some published numbers: matched on the keys it names."""

    match: dict
    note: str
    tolerance: float | None = None  # in the printed units (after ``scale``)
    #: A calbench method that runs the paper's procedure, whose spread verifies the note.
    verify: str | None = None

    def applies(self, row) -> bool:
        return all(str(row[k]) == str(v) for k, v in self.match.items())


def rules() -> list[Rule]:
    """Every paper pack's ``notes.yaml`` rules. A rule names some of ``paper, table,
    dataset, method, metric`` and applies to every published number that matches all it
    names (the notes of all matching rules are shown; the first rule with a ``tolerance``
    sets it). ``tolerance`` (in the printed units) turns "differs" into "within tolerance":
    give one only with its measured reason in ``note``. A note that states a measurement (a
    figure, "this file") names the ``dataset`` it was measured on, so it appears on that data
    set's rows only; a rule without a dataset states the general cause, which other
    networks' rows carry. ``verify: METHOD`` names the procedure twin whose spread verifies
    the note."""
    out = []
    for _, entry in pack_entries("notes.yaml"):
        match = {k: entry[k] for k in _RULE_KEYS if k in entry}
        note = " ".join(str(entry["note"]).split())
        out.append(Rule(match, note, entry.get("tolerance"), entry.get("verify")))
    return out


def _calbench_values(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean over folds (``value``) of the newest cell (``config_hash``) of each (dataset,
    classifier, method), indexed by (dataset, method, metric): cells run with other settings
    (another data path, seed, protocol) are never averaged together."""
    if rows.empty:
        return pd.DataFrame(columns=["value", "config_hash"])
    cell = ["dataset", "classifier", "method"]
    newest = rows.sort_values("written").groupby(cell)["config_hash"].last()
    rows = rows[rows["config_hash"].isin(newest)]
    grouped = rows.groupby(["dataset", "method", "metric"])
    return pd.DataFrame(
        {"value": grouped["value"].mean(), "config_hash": grouped["config_hash"].first()}
    )


#: What a procedure method's cells differ in: its seed, or (Rahimi et al.'s IOP, whose seed
#: is fixed) which of the authors' cross-validation models predicts.
DRAWN = ("seed", "fold")


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
        """How many draws fall below the printed number, round to it (within half a printed
        unit) and fall above it."""
        values = np.asarray(self.values) * scale
        slack = half_unit * (1 + 1e-9)
        below = int((values < printed - slack).sum())
        above = int((values > printed + slack).sum())
        return below, len(values) - below - above, above

    def holds(self, printed: float, scale: float, half_unit: float) -> bool:
        """The printed number lies inside the spread widened by half a printed unit."""
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


def procedure_minutes(twin: str) -> float | None:
    """Minutes the procedure twin takes on DenseNet-40 CIFAR-10 on 2 cores, as its paper
    pack measured them (``pack.yaml``'s ``procedure_minutes``); `calbench reproduce` runs
    the twins only when asked (``--procedures``) and says what verifying a cause costs."""
    for pack in paper_packs().values():
        minutes = (pack.meta.get("procedure_minutes") or {}).get(twin)
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
    cost = f", about {minutes:g} minutes on 2 cores" if minutes else ""
    return f"Verify with `calbench reproduce {preset} --procedures` ({twin}{cost}). "


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
    store = ResultStore(results_dir)
    rows = store.read(preset, latest=False)
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


def _average_ranks(specs, rows: pd.DataFrame) -> dict:
    """(spec, row label, column label) -> value of calbench's own tables for the published
    numbers that are average ranks (Kull Tables 1-2: per classifier and over all tasks)."""
    from calbench.errors import CalbenchError
    from calbench.metrics import higher_is_better
    from calbench.tables.catalogue import build_table
    from calbench.tables.write import table_specs

    found = {}
    for name in specs:
        try:
            table = build_table(table_specs()[name], rows, higher_is_better)
        except CalbenchError:  # no task complete yet: those numbers are "not run"
            continue
        for (_, label), line in zip(table.row_labels, table.values, strict=True):
            for column, value in zip(table.columns, line, strict=True):
                found[(name, label, column)] = value
    return found


def _row_label(dataset: str) -> str:
    """``classifier:adas`` -> ``adas``; ``classifier:all`` -> the tables' ``avg rank``."""
    label = dataset.split(":", 1)[1]
    return "avg rank" if label == "all" else label


def _status(ours, printed, half_unit, tolerance, spread, scale, pending=False) -> str:
    """``pending``: a procedure that would verify the stated cause is shipped but has not
    run here."""
    if np.isnan(ours):
        return "not run"
    if abs(ours - printed) <= half_unit * (1 + 1e-9):
        return "equal"
    if tolerance is not None and abs(ours - printed) <= tolerance + half_unit:
        return "within tolerance"
    if spread is not None and spread.holds(printed, scale, half_unit):
        return "verified cause"
    return "cause not verified" if pending and spread is None else "unexplained"


def compare(preset: str, results_dir="results", intervals=None) -> pd.DataFrame:
    """The report's rows for every published number of ``preset``; with ``intervals``
    (`calbench.stats.bootstrap.BootstrapSettings`) also calbench's bootstrap interval of
    each number and whether the printed number lies in it (columns `INTERVAL_COLUMNS`)."""
    table = published(preset)
    store = ResultStore(results_dir)
    stored = store.read(preset)
    values = _calbench_values(stored)
    ranked = _average_ranks(sorted(set(table["spec"]) - {""}), stored)
    known = rules()
    procedures = {r.verify for r in known if r.verify}
    spreads = procedure_spreads(results_dir, preset, procedures) if procedures else {}
    out, bounds = [], []
    for _, row in table.iterrows():
        cells = ""
        if row["spec"]:
            ours = ranked.get((row["spec"], _row_label(row["dataset"]), row["column"]), np.nan)
        else:
            key = (row["dataset"], row["method"], row["metric"])
            found = key in values.index
            ours = values.at[key, "value"] * float(row["scale"]) if found else np.nan
            cells = values.at[key, "config_hash"] if found else ""
        printed, decimals, scale = row["printed"], row["decimals"], float(row["scale"])
        matching = [r for r in known if r.applies(row)]
        tolerance = next((r.tolerance for r in matching if r.tolerance is not None), None)
        verify = next((r.verify for r in matching if r.verify), None)
        spread = spreads.get((row["dataset"], verify, row["metric"])) if verify else None
        half_unit = 0.5 * 10.0**-decimals
        hint = verify_hint(preset, verify) if verify else ""
        status = _status(ours, printed, half_unit, tolerance, spread, scale, bool(hint))
        procedure = ""
        if verify and status != "not run":
            procedure = f"{verify}: " + (
                spread.describe(scale, decimals + 1) if spread else "not run"
            )
            if spread and not spread.deterministic:
                procedure += "; " + spread.describe_place(printed, scale, half_unit)
            if spread:
                cells = " ".join([cells, *spread.cells]).strip()
        note = " ".join(r.note for r in matching) if status != "equal" else ""
        if status == "cause not verified":
            note = hint + note
        elif status == "unexplained":
            if not matching:
                note = "cause not yet known"
            elif spread is not None:
                note = "the paper's procedure, run in calbench, misses the printed value. " + note
            else:
                note = "stated cause not yet verified by running it in calbench. " + note
        delta = ours - printed
        out.append(
            [
                row["paper"],
                row["table"],
                row["dataset"],
                row["column"],
                row["method"],
                row["metric"],
                row["value"],
                "" if np.isnan(ours) else f"{ours:.{decimals + 1}f}",
                "" if np.isnan(ours) else f"{delta:+.{decimals + 1}f}",
                status,
                procedure,
                note,
                cells,
            ]
        )
        if intervals is not None:
            bounds.append(_interval(store, stored, cells.split(" ")[0], row, intervals))
    report = pd.DataFrame(out, columns=REPORT_COLUMNS)
    if intervals is not None:
        report[INTERVAL_COLUMNS] = pd.DataFrame(bounds, columns=INTERVAL_COLUMNS)
    return report


#: The columns a report with intervals adds: calbench's interval at the printed scale, and
#: whether the printed number lies in it (its printed rounding allowed for).
INTERVAL_COLUMNS = ["interval", "inside"]


def _interval(store, stored, cell_hash, row, settings) -> list[str]:
    """[interval, inside] of one published number ("" where it has no single cell)."""
    if not cell_hash or row["spec"]:
        return ["", ""]
    sha256 = stored.loc[stored["config_hash"] == cell_hash, "predictions_sha256"].iat[0]
    boot = stored_bootstrap(store, cell_hash, sha256, [row["metric"]], settings)
    scale, decimals = float(row["scale"]), row["decimals"]
    low, high = (scale * v for v in boot.interval(row["metric"], settings.alpha, settings.method))
    half = 0.5 * 10.0**-decimals
    inside = low - half <= row["printed"] <= high + half
    return [f"[{low:.{decimals + 1}f}, {high:.{decimals + 1}f}]", "yes" if inside else "no"]


def interval_summary(report: pd.DataFrame, settings) -> str:
    """How many of the numbers that ran lie inside calbench's interval."""
    ran = report[report["inside"] != ""]
    held = int((ran["inside"] == "yes").sum())
    differ = ran[ran["status"].isin(DIFFERS)]
    return (
        f"{held} of {len(ran)} published numbers lie inside calbench's {settings.describe()} "
        f"(widened by half a printed unit); of the {len(differ)} that differ, "
        f"{int((differ['inside'] == 'yes').sum())} lie inside it."
    )


def counts(report: pd.DataFrame) -> dict:
    """Published numbers by status (every status present, zero where none)."""
    found = report["status"].value_counts()
    return {status: int(found.get(status, 0)) for status in STATUSES}


def summary(report: pd.DataFrame) -> list[str]:
    """The closing lines: how many numbers were reproduced, which differ and whether their
    cause is verified, what did not run."""
    n = counts(report)
    ran = report[report["status"] != "not run"]
    good = n["equal"] + n["within tolerance"]
    differ = sum(n[status] for status in DIFFERS)
    pending = n["cause not verified"]
    lines = [
        f"{good} of {len(ran)} published numbers reproduced ({n['equal']} equal at the "
        f"printed rounding, {n['within tolerance']} within a stated tolerance); {differ} "
        f"differ: {n['verified cause']} with a cause verified by running the paper's "
        "procedure, "
        + (f"{pending} with a stated cause whose procedure was not run here, " if pending else "")
        + f"{n['unexplained']} unexplained."
    ]
    for status in DIFFERS:
        part = ran[ran["status"] == status]
        if len(part):
            by_table = part.groupby(["paper", "table"]).size()
            lines.append(
                f"{status.capitalize()}: "
                + "; ".join(f"{p} {t}: {k}" for (p, t), k in by_table.items())
                + "."
            )
    missing = report[report["status"] == "not run"]
    ranks = missing["dataset"].str.startswith("classifier:")
    if (~ranks).any():
        sets = sorted(missing.loc[~ranks, "dataset"].unique())
        lines.append(
            f"{int((~ranks).sum())} published numbers not run: no cells for {', '.join(sets)} "
            "(their data are absent here, or the preset has not run on them)."
        )
    if ranks.any():
        lines.append(
            f"{int(ranks.sum())} published average ranks not computed: the preset's rank "
            "tables have no task with every method run yet."
        )
    return lines


def render_markdown(preset: str, report: pd.DataFrame, lines: list[str]) -> str:
    from tabulate import tabulate

    papers = sorted(report["paper"].unique())
    skipped = not_reproducible()
    skipped = skipped[skipped["paper"].isin(papers)]
    out = [
        f"# Reproduction of `{preset}`: published vs calbench",
        "",
        *lines,
        "",
        "Status: *equal* = rounds to the printed digits; *within tolerance* = off by no more "
        "than the tolerance the note justifies; *verified cause* = differs, and the paper's "
        "own procedure, run in calbench (column *procedure*: its spread over seeds or folds, "
        "and how many draws lie below the printed value, round to it and lie above it), "
        "holds the printed value; *unexplained* = differs otherwise (the note says what is known "
        "and what is not verified); *not run* = no stored cell. *cells*: the config hashes "
        "of the stored cells the numbers came from (`store/HASH.csv|yaml`).",
        "",
    ]
    if "inside" in report:
        out[-1:-1] = [
            "*interval*: calbench's bootstrap interval of the number, from the cell's stored "
            "test predictions (the summary says which); *inside*: the printed number lies in "
            "it, widened by half a printed unit.",
        ]
    shown = report[report["status"] != "not run"].copy()
    # Long causes as numbered notes under the table, so the table stays readable.
    causes = [n for n in dict.fromkeys(shown["note"]) if n]
    shown["note"] = shown["note"].map(lambda n: f"[{causes.index(n) + 1}]" if n else "")
    if len(shown):
        table = tabulate(
            shown, headers="keys", tablefmt="github", showindex=False, disable_numparse=True
        )
        out += [table, ""]
        out += [f"[{i}] {cause}" + "  " for i, cause in enumerate(causes, start=1)]
        out.append("")
    if len(skipped):
        out += ["## Tables that could not be run", ""]
        out += [f"- {r.paper} {r.table}: {r.reason}" for r in skipped.itertuples()]
        out.append("")
    return "\n".join(out)
