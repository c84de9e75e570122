"""Transcribe CalArena's published multiclass results into calbench's published numbers.

    python scripts/transcribe_calarena.py PATH_TO_CALARENA_CHECKOUT

reads ``results/cv-multiclass/*.csv`` and ``results/imagenet-multiclass/*.csv`` (one file per
method: a row per data set and model with Brier, log-loss, ECE-15, accuracy and seconds) and
writes ``calbench/papers/calarena2026/published/calarena2026_multiclass.csv``: one row per
number, the value exactly as CalArena printed it, and ``calarena2026_sources.json``: each
file's SHA-256 and row count, which the tests check the transcription against
(`tests/papers/calarena2026/test_calarena.py` rebuilds every source file from the
transcription, byte for byte).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sys
from pathlib import Path

from calbench.papers.calarena2026.published_results import (
    BENCHMARKS,
    METHODS,
    METRICS,
    SOURCE_COLUMNS,
    calbench_dataset,
)

OUT = Path(__file__).resolve().parents[1] / "calbench" / "papers" / "calarena2026" / "published"


def main(checkout: str) -> None:
    rows, sources = [], {}
    for benchmark, preset in BENCHMARKS.items():
        folder = Path(checkout) / "results" / benchmark
        for path in sorted(folder.glob("*.csv")):
            method = path.stem
            data = path.read_bytes()
            records = list(csv.DictReader(io.StringIO(data.decode())))
            sources[f"{benchmark}/{path.name}"] = {
                "sha256": hashlib.sha256(data).hexdigest(),
                "rows": len(records),
            }
            for record in records:
                for metric, calbench_metric in METRICS.items():
                    rows.append(
                        {
                            "paper": "CalArena",
                            "table": benchmark,
                            "preset": preset,
                            "dataset": calbench_dataset(record["dataset"], record["model"]),
                            "column": method,
                            "method": METHODS[method],
                            "metric": calbench_metric,
                            "scale": 1,
                            "value": record[f"{method}_{metric}"],
                            "rank": "",
                            **{ours: record[theirs] for theirs, ours in SOURCE_COLUMNS.items()},
                            "seconds": record[f"{method}_time"],
                        }
                    )
    columns = list(rows[0])
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (OUT / "calarena2026_multiclass.csv").write_text(buffer.getvalue())
    (OUT / "calarena2026_sources.json").write_text(json.dumps(sources, indent=1) + "\n")
    print(f"{len(rows)} numbers from {len(sources)} files")


if __name__ == "__main__":
    main(sys.argv[1])
