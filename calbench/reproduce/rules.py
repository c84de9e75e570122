"""The known causes of published numbers calbench does not match digit for digit: each paper
pack's ``notes.yaml`` rules (`rules`), the tolerances and the twins that verify them."""

from __future__ import annotations

from dataclasses import dataclass

from calbench.packs import pack_entries

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
