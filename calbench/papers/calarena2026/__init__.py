"""CalArena 2026: its float32 replicas of isotonic regression, Venn-Abers, VS, ODIR, MS,
SMS and probmetrics' CDF-Spline (its genuine methods, CIR, boosting, BBQ, ENIR, Lucena's
spline and the Dirichlet kernel, are the library's, in their families), and the per-method
table its reproduction report adds."""

from calbench.metrics import UNIT, MetricSpec
from calbench.metrics.resampled import recomputed_whole
from calbench.papers.calarena2026.binary_replicas import (
    Float32Boosted,
    Float32DirichletKernel,
    PackageVennAbers,
    SklearnLogitScaling,
)
from calbench.papers.calarena2026.ece import calarena_ece
from calbench.papers.calarena2026.importer import import_calarena
from calbench.papers.calarena2026.kuiper import calarena_gap
from calbench.papers.calarena2026.published_results import BENCHMARKS, method_table
from calbench.papers.calarena2026.replicas import (
    Float32MatrixScaling,
    Float32StructuredMatrixScaling,
    LogProbabilityVectorScaling,
    ProbmetricsCDFSpline,
    StoredBeta,
    StoredIsotonic,
    StoredVennAbers,
    SummedODIR,
)
from calbench.papers.calarena2026.stored_inputs import float32_probabilities

CALIBRATORS = {
    "vs_logp": (LogProbabilityVectorScaling, {}),
    "isotonic_stored": (StoredIsotonic, {}),
    "beta_stored": (StoredBeta, {}),
    "ms_float32": (Float32MatrixScaling, {}),
    "sms_float32": (Float32StructuredMatrixScaling, {}),
    "venn_abers_stored": (StoredVennAbers, {}),
    "dir_odir_summed": (SummedODIR, {"regularization": "odir", "reference_class": True}),
    "cdf_spline_calarena": (ProbmetricsCDFSpline, {}),
    "logit_scaling_sklearn": (SklearnLogitScaling, {}),
    "kernel_nw_float32": (Float32DirichletKernel, {}),
    "xgboost_float32": (Float32Boosted, {"library": "xgboost"}),
    "venn_abers_package": (PackageVennAbers, {}),
}

#: CalArena's binary ``ece-15`` in the dtype its method returned (`ece`).
#: Recomputed whole on each bootstrap resample (no vectorised form).
METRICS = {
    "calarena_ece": MetricSpec(calarena_ece, "lower", UNIT, resampled=recomputed_whole),
}

#: ``kuiper_error``'s ``arithmetic: calarena``: probmetrics' float32 sums.
KUIPER_ARITHMETIC = {"calarena": calarena_gap}

#: ``calbench import calarena DIR``: its published per-task CSVs into the store.
IMPORTERS = {"calarena": import_calarena}

#: ``dataset.float32_probabilities: true``: the inputs as its HDF5 files store them.
VIEWS = {"float32_probabilities": float32_probabilities}


def report_extra(preset, report, results_dir) -> str:
    """Beside the comparison: CalArena's per-method fit times and calbench's own variants."""
    return method_table(report, results_dir) if preset in BENCHMARKS.values() else ""
