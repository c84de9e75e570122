"""CalArena (probkit/CalArena, 2026) as a reproduction target: its published multiclass rows
are data (``published/calarena2026_multiclass.csv``, transcribed by
``scripts/transcribe_calarena.py``), compared as the papers' tables are
(`calbench.reproduce.comparison`), plus what a benchmark publishes and a paper does not: the
fit seconds of each method, and beside each CalArena method the variant calbench follows for
the papers.

CalArena prints its numbers in full, from float32 arithmetic (its probabilities are stored as
float32 and probmetrics scores them in float32): no calbench number can equal them digit for
digit, so the pack's ``notes.yaml`` states the tolerance.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from calbench.markup import markdown_table, md_text

#: CalArena's result folders -> the calbench preset that reruns them.
BENCHMARKS = {
    "cv-multiclass": "calarena_cv",
    "imagenet-multiclass": "calarena_imagenet",
    "cv-binary": "calarena_cv_binary",
}

#: CalArena's method names -> calbench's method for its definition.
METHODS = {
    "Base-model": "uncal",
    "Hist-uniform": "histbin_uniform_prior",
    "Hist-quantile": "histbin_quantile_prior",
    "Isotonic": "isotonic_calarena",
    "CIR": "cir",
    "Venn-Abers": "venn_abers_calarena",
    "BBQ": "bbq",
    "Spline": "spline_lucena",
    "TS": "ts",
    "ETS": "ets",
    "VS": "vs_logp",
    "SVS": "svs",
    "MS": "ms_calarena",
    "SMS": "sms_calarena",
    "Dirichlet": "dir_odir_calarena",
    "Kernel": "kernel_nw",
    "XGBoost": "xgboost",
    "LightGBM": "lightgbm",
    "CatBoost": "catboost",
    # the binary track's own methods
    "Beta": "beta_calarena",
    "CDF-Spline": "cdf_spline_calarena",
    "ENIR": "enir",
    "Platt-logits": "platt_logits",
    "Platt-probs": "platt_probs",
    "Quadratic": "quadratic",
    "Scaling-Binning": "scaling_binning",
}

#: Where calbench defines the method otherwise (for a paper, or as its own better fit): that
#: variant, run beside CalArena's on the same data.
OWN_VARIANTS = {
    "Hist-uniform": "histbin_width",
    "Isotonic": "isotonic_plain",
    "VS": "vs",
    "MS": "dir",  # the unpenalised optimum (Newton); Kull's is ms_odir
    "Venn-Abers": "venn_abers_ovr",
    "SMS": "sms",  # the same objective in float64, to a tighter tolerance
    "Dirichlet": "dir_odir",
    "Spline": "spline",
    "Kernel": "kernel_dir",
    "Beta": "beta",  # betacal's map in float64, clipped at float64's epsilon
}

#: CalArena's metric columns -> calbench's metric (conf/metrics/calarena.yaml), in its
#: files' order.
METRICS = {
    "brier": "brier",
    "logloss": "log_loss_float32",
    "ece-15": "confidence_ece",
    "accuracy": "accuracy",
}
#: The binary benchmarks' columns (conf/metrics/calarena_binary.yaml): torchmetrics' binary
#: ECE is class 1's binned error, calbench's classwise ECE of two classes.
BINARY_METRICS = {
    "brier": "brier",
    "logloss": "log_loss_float32",
    "kuiper": "kuiper_error",
    "ece-15": "classwise_ece",
    "accuracy": "accuracy",
}


def metrics_of(benchmark: str) -> dict:
    """A benchmark's metric columns -> calbench's metrics."""
    return BINARY_METRICS if benchmark.endswith("-binary") else METRICS


#: CalArena's per-task columns, kept as ``source_*`` so the source files can be rebuilt.
SOURCE_COLUMNS = {
    "dataset": "source_dataset",
    "model": "source_model",
    "cal_size": "cal_size",
    "test_size": "test_size",
    "n_classes": "n_classes",
}

_PREFIX = {"c10": "c10", "c100": "c100", "SVHN": "svhn", "imagenet": "imgnet"}


def calbench_dataset(dataset: str, model: str) -> str:
    """calbench's name for CalArena's (data set, model), where calbench registers it (Kull
    et al.'s logits and the two ImageNet networks); otherwise "" (kept for the source
    checksums, left out of comparisons)."""
    from calbench.conf_files import group_files

    name = f"{_PREFIX.get(dataset, dataset)}_{model}"
    return name if name in group_files("dataset") else ""


#: This pack's published numbers.
PUBLISHED = Path(__file__).parent / "published"


#: The transcriptions, one per problem type (`scripts/transcribe_calarena.py`).
PUBLISHED_FILES = ("calarena2026_multiclass.csv", "calarena2026_binary.csv")


def published_rows() -> pd.DataFrame:
    return pd.concat(
        [pd.read_csv(PUBLISHED / f, dtype=str, keep_default_na=False) for f in PUBLISHED_FILES],
        ignore_index=True,
    )


def sources() -> dict:
    """The transcribed CalArena files: name -> {sha256, rows}."""
    return json.loads((PUBLISHED / "calarena2026_sources.json").read_text())


def rebuild_source(rows: pd.DataFrame, benchmark: str, method: str) -> bytes:
    """CalArena's ``results/BENCHMARK/METHOD.csv`` as it was read, from the transcription."""
    part = rows[(rows["table"] == benchmark) & (rows["column"] == method)]
    metrics = metrics_of(benchmark)
    columns = [c for c in SOURCE_COLUMNS if c != "n_classes" or not benchmark.endswith("-binary")]
    lines = [",".join([*columns, *(f"{method}_{m}" for m in metrics), f"{method}_time"])]
    for _, task in part.groupby(["source_dataset", "source_model"], sort=False):
        first = task.iloc[0]
        values = task.set_index("metric")["value"]
        lines.append(
            ",".join(
                [first[SOURCE_COLUMNS[c]] for c in columns]
                + [values[metrics[m]] for m in metrics]
                + [first["seconds"]]
            )
        )
    return ("\n".join(lines) + "\n").encode()


def _method_row(row, dataset: str, values, seconds, published_seconds) -> list[str]:
    """One CalArena method's line of `method_table`."""
    ours = f"{float(row['calbench']):.6f}"
    if "interval" in row and row["interval"]:
        low, high = (float(v) for v in row["interval"].strip("[]").split(","))
        ours += f" [{low:.4f}, {high:.4f}]"
    variant = OWN_VARIANTS.get(row["column"], "")
    variant_value = values.get((dataset, variant))
    return [
        row["column"],
        row["method"],
        f"{float(row['published']):.6f}",
        ours,
        row["status"],
        f"{variant} {variant_value:.6f}" if variant_value is not None else variant,
        f"{float(published_seconds.get((dataset, row['column']), 'nan')):.3f}",
        f"{seconds.get((dataset, row['method']), float('nan')):.3f}",
    ]


def method_table(report: pd.DataFrame, results_dir, metric: str = "log_loss_float32") -> str:
    """Markdown: per network that ran and CalArena method, CalArena's number, calbench's
    (with its interval where the report has one) and status, the variant calbench follows
    otherwise (a paper's, or its own) with its number on the same data, and the two fit
    times (CalArena's from its machine, calbench's from this one: not a speed-up)."""
    from calbench.results.experiment import Results

    ran = report[(report["metric"] == metric) & (report["status"] != "not run")]
    if ran.empty:
        return ""
    preset = BENCHMARKS[ran["table"].iloc[0]]
    stored = Results.of(results_dir).rows(preset)
    values = stored[stored["metric"] == metric].groupby(["dataset", "method"])["value"].mean()
    seconds = stored.groupby(["dataset", "method"])["fit_seconds"].median()
    published_seconds = published_rows().drop_duplicates(["dataset", "column"])
    published_seconds = published_seconds.set_index(["dataset", "column"])["seconds"]
    lines = []
    for dataset, part in ran.groupby("dataset"):
        table = [
            _method_row(row, dataset, values, seconds, published_seconds)
            for _, row in part.sort_values("column").iterrows()
        ]
        headers = [
            "CalArena",
            "calbench method",
            "CalArena",
            "calbench",
            "status",
            "calbench's variant",
            "CalArena s",
            "calbench s",
        ]
        shown = pd.DataFrame(table, columns=pd.Index(headers))
        lines += [
            f"### {md_text(dataset)}: {md_text(metric)}",
            "",
            markdown_table(shown, index=False, tablefmt="github"),
            "",
        ]
    return "\n".join(
        [
            "## Method by method",
            "",
            "Fit seconds: CalArena's are fit plus predict on its own machine (its CSVs); "
            "calbench's are the stored fit time on this one. They are not a speed comparison "
            "(`make bench` times both engines in one process).",
            "",
            *lines,
        ]
    )
