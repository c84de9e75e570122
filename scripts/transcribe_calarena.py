"""Transcribe CalArena's published results into calbench's published numbers.

    python scripts/transcribe_calarena.py PATH_TO_CALARENA_CHECKOUT

reads ``results/cv-multiclass/*.csv``, ``results/imagenet-multiclass/*.csv`` and
``results/cv-binary/*.csv`` (one file per method: a row per data set and model with Brier,
log-loss, ECE-15, accuracy, Kuiper for binary tasks, and seconds; ``../shared/data/
calarena_results`` holds them) and writes ``calbench/papers/calarena2026/published/
calarena2026_multiclass.csv`` and ``calarena2026_binary.csv``: one row per number, the value
exactly as CalArena printed it, and ``calarena2026_sources.json``: each
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
    SOURCE_COLUMNS,
    calbench_dataset,
    metrics_of,
)

OUT = Path(__file__).resolve().parents[1] / "calbench" / "papers" / "calarena2026" / "published"


def main(checkout: str) -> None:
    rows, sources = {"multiclass": [], "binary": []}, {}
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
                for metric, calbench_metric in metrics_of(benchmark).items():
                    rows[benchmark.rsplit("-", 1)[1]].append(
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
                            **{
                                ours: record.get(theirs, "")
                                for theirs, ours in SOURCE_COLUMNS.items()
                            },
                            "seconds": record[f"{method}_time"],
                        }
                    )
    for kind, numbers in rows.items():
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, list(numbers[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(numbers)
        (OUT / f"calarena2026_{kind}.csv").write_text(buffer.getvalue())
    (OUT / "calarena2026_sources.json").write_text(json.dumps(sources, indent=1) + "\n")
    print(f"{sum(map(len, rows.values()))} numbers from {len(sources)} files")


if __name__ == "__main__":
    main(sys.argv[1])
