"""probmetrics' own Kuiper arithmetic (CalArena's binary ``kuiper`` metric): the scores in
float32, sorted by ``torch.sort`` and summed in float32. Binning methods' outputs tie by
design and inside a run of ties the order of the outcomes moves the curves: on DenseNet-40's
animals against machines this gives CalArena's published Kuiper errors of Hist-quantile,
Hist-uniform, BBQ and Isotonic to the printed digit, where numpy 1.x's order gives up to
3.4e-4 less. ``kuiper_error``'s ``arithmetic: calarena``
(`calbench.metrics.ks.KUIPER_ARITHMETIC`)."""

from __future__ import annotations

import numpy as np


def calarena_gap(scores, outcomes) -> np.ndarray:
    """The cumulative outcomes minus the cumulative scores, as probmetrics sums them."""
    import torch

    ordered, order = torch.sort(torch.as_tensor(scores, dtype=torch.float32))
    hits = torch.as_tensor(np.asarray(outcomes), dtype=torch.float32)[order]
    n = len(scores)
    return (torch.cumsum(hits, 0) / n - torch.cumsum(ordered, 0) / n).double().numpy()
