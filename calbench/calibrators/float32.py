"""CalArena's inputs (probkit/CalArena ``run_benchmark.py``, built on probmetrics 1.3), shared
by the library's CalArena methods in their families (`PriorFallbackBinning`, `NetcalBBQ`,
`CenteredIsotonic`, `NetcalENIR`, `DirichletKernel`, `BoostedCalibrator`, `LucenaSpline`)
and by the pack ``calarena2026``'s float32 replicas.

CalArena hands every calibrator float32 probabilities ``p`` (`calarena_probabilities`);
methods on logits use ``max(ln p, ln 1.18e-38)`` (probmetrics'
``CategoricalProbs.get_logits``: the smallest normal float32), `calarena_log_probabilities`;
``dataset.float32_probabilities`` makes a data set's logits exactly it, so calbench's own TS,
VS and MS fit what CalArena's fit. One-vs-rest outputs are clipped at 1e-30 and
renormalised, as probmetrics' ``MulticlassOneVsRestCalibrator`` (`OneVsRestFloor`).
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.binary import OneVsRestCalibrator
from calbench.simplex import float32_softmax

#: ln of the smallest normal float32: probmetrics' floor on ln p.
TINY32 = float(np.finfo(np.float32).tiny)
LOG_TINY32 = float(np.log(TINY32))


def calarena_probabilities(logits: np.ndarray) -> np.ndarray:
    """The float32 probabilities CalArena's methods are given. Logits whose rows are already
    log-probabilities (a data set read with ``float32_probabilities``, or given as
    probabilities) are exponentiated without renormalising, so float32 probabilities come
    back bit for bit; other logits take CalArena's float32 softmax."""
    z = np.asarray(logits, dtype=np.float64)
    if np.all(z <= 0.0):
        with np.errstate(under="ignore"):
            p = np.exp(z)
        if np.all(np.abs(p.sum(axis=1) - 1.0) < 1e-5):
            return p.astype(np.float32)
    return float32_softmax(z)


def calarena_log_probabilities(logits: np.ndarray, engine: str = "numpy") -> np.ndarray:
    """What CalArena's methods on logits see: ``ln p`` of `calarena_probabilities` in
    float32, floored at the smallest normal float32's log. probmetrics takes that log with
    numpy for its boosting calibrators (``multiclass_probs_to_logits``) and with torch for
    the others (``CategoricalProbs.get_logits``); the two float32 logs differ in the last
    bit for about 2% of DenseNet-40's entries, enough to move a float32 BFGS run."""
    p = calarena_probabilities(logits)
    if engine == "torch":
        import torch

        log_p = torch.log(torch.from_numpy(p)).numpy()
    else:
        with np.errstate(divide="ignore"):
            log_p = np.log(p)
    return np.maximum(log_p, np.float32(LOG_TINY32))


def _clipped_rows(out: np.ndarray, floor: float = 1e-30) -> np.ndarray:
    out = np.clip(out, floor, None)
    return out / out.sum(axis=1, keepdims=True)


class OneVsRestFloor(OneVsRestCalibrator):
    """probmetrics' one-vs-rest combination: each column clipped at 1e-30, rows renormalised
    (calbench's `OneVsRestCalibrator` makes an all-zero row uniform instead). On a
    two-class task CalArena runs the binary map itself, with no clip: a run or bin of one
    label predicts exactly 0 or 1, which its float32 metrics price at ln(float32 tiny). The
    floor there is float32's tiny, so every metric equals CalArena's and calbench's own
    log-loss stays finite (a certain miss costs 87.3, where 1e-30 made it 69.1: CIR's
    cv-binary log-loss on DenseNet-40, 0.038039 against CalArena's 0.039865, one test row).
    Subclasses take that floor as their parameter ``two_class_floor``."""

    # A bin or run of one label predicts 0 or 1; the 1e-30 floor leaves 1 - 9e-30.
    _certainty = "possible"

    def _scores(self, logits):
        return calarena_probabilities(logits).astype(np.float64)

    def _predict_proba(self, logits):
        out = self._binary_outputs(self._scores(logits))
        return _clipped_rows(out, self.two_class_floor if out.shape[1] == 2 else 1e-30)
