"""The columns of a cell's rows in the results store."""

from __future__ import annotations

from calbench.results.integrity import SEAL

#: The labels that name a cell in tables; two stored cells sharing them (and their setting,
#: see `superseded_cells`) supersede each other.
LABELS = [
    "experiment",
    "dataset",
    "classifier",
    "method",
    "criterion",
    "loss",
    "shift",
    "protocol",
    "seed",
]

COLUMNS = [
    *LABELS[:-1],
    "fold",
    "metric",
    "value",
    "fit_seconds",
    "params",
    "fitted",
    "config_hash",
    "seed",
    "calbench_version",
    "predictions_sha256",
]

#: Columns a cell's rows may lack (those of earlier versions, or rows made by hand), and
#: what they hold then: ``fitted`` (`Calibrator.learned` per fold, JSON).
OPTIONAL_COLUMNS = {"fitted": "{}"}

#: What the store adds to a cell's `COLUMNS`: when it was stored, and the rows' checksum.
STORED_COLUMNS = [*COLUMNS, "config_sha256", "stored_at", SEAL]
