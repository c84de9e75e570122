"""The reliability diagram's resampled bars and ECE, whose home is now
`calbench.metrics.resampled` (kept here for the callers that import them from stats)."""

from calbench.metrics.resampled import RECOMPUTED, binned_ece_replicates, binned_frequencies

__all__ = ["RECOMPUTED", "binned_ece_replicates", "binned_frequencies"]
