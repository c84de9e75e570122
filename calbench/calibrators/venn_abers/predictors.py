r"""Venn-Abers predictors, inductive and cross, multiclass (Vovk, Petej and Fedorova 2015;
Manokhin 2017).

A binary inductive Venn-Abers predictor (IVAP) fits isotonic regression twice per test
score ``s``: on the calibration pairs plus ``(s, 0)``, and plus ``(s, 1)``. The two fitted
values at ``s``, ``p0 <= p1``, bracket the calibrated probability; the single one
returned is ``p1 / (1 - p0 + p1)``, the minimiser of the worst-case log-loss. Only the
order of the scores matters, so ``p0`` and ``p1`` are tabulated once per gap between the
sorted distinct calibration scores.

The tabulation uses the max-min formula of isotonic regression (Robertson, Wright and
Dykstra 1988, Thm 1.4.4): with the calibration scores' distinct values pooled into ``m``
blocks, cumulative weights ``W_a`` and positives ``Y_a`` (``W_0 = Y_0 = 0``), and the test
point inserted after block ``i``,

.. math::

    p_1[i] = \max_{a \le i} \min_{b \ge i} \frac{Y_b - Y_a + 1}{W_b - W_a + 1}, \qquad
    p_0[i] = \max_{a \le i} \min_{b \ge i} \frac{Y_b - Y_a}{W_b - W_a + 1}.

For each ``a`` the minimum over ``b >= i`` is a running minimum from the right, so both
tables cost O(m^2) vectorised operations. A test score equal to a calibration score joins
its block on the side that favours its label (``p1`` before the block, ``p0`` after it),
as the ``venn-abers`` package does.

Multiclass: one-vs-one (the package's default for pre-fitted scores) couples the pairwise
probabilities ``p_ij`` as ``1 / (sum_{j != i} 1 / p_ij - (k - 2))``, then renormalises;
one-vs-rest renormalises the k binary outputs. Cross Venn-Abers (CVAP) splits the
calibration data into stratified folds (per binary problem, as the package's
``VennAbersCV``), fits an IVAP on each fold, and merges their ``(p0, p1)`` pairs:
``GM(p1) / (GM(1 - p0) + GM(p1))`` for the log-loss, or the Brier-loss form.

Where calbench differs from the ``venn-abers`` package (checked against it in
tests/calibrators/test_venn_abers.py): the binary scores are logit differences ``z_j - z_i``
(one-vs-one) or log-probabilities (one-vs-rest), which order the samples exactly as the package's
probability ratios do but do not saturate at 1.0, where the package's confident samples
tie; and with a fixed classifier, cross Venn-Abers' folds share the same scores (the
package refits its classifier per fold).
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import KFold, StratifiedKFold

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import Choice
from calbench.simplex import log_softmax

# Rows of the (a, b) table built at once: bounds the memory at _BLOCK x m floats.
_BLOCK = 256


def venn_abers_tables(scores: np.ndarray, labels: np.ndarray):
    """The IVAP of one binary problem: ``(c, p0, p1)``, the sorted distinct calibration
    scores and the two isotonic values for a test score in each of the ``len(c) + 1`` gaps
    (module docstring)."""
    c, block = np.unique(scores, return_inverse=True)
    m = len(c)
    weights = np.concatenate([[0.0], np.cumsum(np.bincount(block, minlength=m))])
    positives = np.concatenate(
        [[0.0], np.cumsum(np.bincount(block, weights=labels.astype(np.float64), minlength=m))]
    )
    p0 = np.full(m + 1, -np.inf)
    p1 = np.full(m + 1, -np.inf)
    # Columns run from b = m down, so the minimum over b >= i is a plain running minimum.
    weights_down, positives_down = weights[::-1], positives[::-1]
    for start in range(0, m + 1, _BLOCK):
        a = np.arange(start, min(start + _BLOCK, m + 1))
        width = m + 1 - start  # only b >= a counts: the columns b = m .. start
        span = weights_down[None, :width] - weights[a, None] + 1.0
        gain = positives_down[None, :width] - positives[a, None]
        # b < a (the last len(a) - 1 columns' lower triangle): no interval containing i.
        below = np.arange(width)[None, :] > (m - a)[:, None]
        span[below] = 1.0
        for table, extra in ((p0, 0.0), (p1, 1.0)):
            ratio = gain + extra
            ratio /= span
            ratio[below] = np.inf
            np.minimum.accumulate(ratio, axis=1, out=ratio)
            ratio[below] = -np.inf  # i >= a only
            np.maximum(table[start:], ratio.max(axis=0)[::-1], out=table[start:])
    return c, p0, p1


def venn_abers_pair(tables, test_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(p0, p1)`` of each test score from `venn_abers_tables`."""
    c, p0, p1 = tables
    return (
        p0[np.searchsorted(c, test_scores, side="right")],
        p1[np.searchsorted(c, test_scores, side="left")],
    )


def merge_pairs(p0: np.ndarray, p1: np.ndarray, loss: str = "log") -> np.ndarray:
    """One probability from IVAP pairs, shape (n, n_folds) each: for one fold
    ``p1 / (1 - p0 + p1)``; for several, the geometric-mean form (log-loss) or the
    Brier-loss form of Vovk et al. (2015, sec. 4)."""
    if loss == "log":
        gm1 = np.exp(np.log(p1).mean(axis=1))
        gm0 = np.exp(np.log1p(-p0).mean(axis=1))
        return gm1 / (gm0 + gm1)
    return p1.mean(axis=1) + 0.5 * (p0**2).mean(axis=1) - 0.5 * (p1**2).mean(axis=1)


class VennAbersCalibrator(Calibrator):
    """Multiclass Venn-Abers: inductive (``n_folds=1``) or cross (``n_folds >= 2``).

    See the module docstring for the binary predictor, the tabulation and the differences
    from the ``venn-abers`` package.

    Parameters
    ----------
    multiclass : {"one_vs_one", "one_vs_rest"}
        One binary problem per pair of classes (on the samples of those two classes,
        coupled as Manokhin 2017), or per class against the rest.
    n_folds : int
        1: the inductive predictor on all calibration data; more: cross Venn-Abers with
        that many stratified folds, each fold's IVAP fitted on it alone.
    loss : {"log", "brier"}
        The loss whose worst case the single probability minimises: ``p1 / (1 - p0 + p1)``
        (log, inductive), or ``p1 + (p0^2 - p1^2) / 2`` (Brier); cross Venn-Abers merges
        its folds' pairs by the same loss.
    random_state : int
        Seeds the folds' shuffle (cross only).
    """

    _parameter_constraints = {
        "multiclass": Choice("one_vs_one", "one_vs_rest"),
        "loss": Choice("log", "brier"),
    }

    def __init__(self, multiclass="one_vs_one", n_folds=1, loss="log", random_state=0):
        self.multiclass = multiclass
        self.n_folds = n_folds
        self.loss = loss
        self.random_state = random_state

    def _problems(self, logits):
        """Each binary problem: (positive class, negative class or None for the rest, its
        scores for every row)."""
        if self.multiclass == "one_vs_rest":
            logp = log_softmax(logits)
            return [(j, None, logp[:, j]) for j in range(logits.shape[1])]
        k = logits.shape[1]
        return [(j, i, logits[:, j] - logits[:, i]) for i in range(k - 1) for j in range(i + 1, k)]

    def _fit(self, logits, y):
        self.tables_ = []
        for positive, negative, scores in self._problems(logits):
            rows = np.ones(len(y), bool) if negative is None else (y == positive) | (y == negative)
            self.tables_.append(self._fit_binary(scores[rows], y[rows] == positive))

    def _fit_binary(self, scores, labels):
        """One table per fold: the whole data (inductive) or each stratified fold. A
        problem with fewer samples of a label than folds (a rare pair of classes) is split
        without stratifying, and one with fewer samples than folds gets the inductive
        table: a fold needs data, and the pair's other problems are unaffected."""
        if self.n_folds == 1 or len(labels) < self.n_folds:
            return [venn_abers_tables(scores, labels)]
        stratify = min(labels.sum(), (~labels).sum()) >= self.n_folds
        splitter = StratifiedKFold if stratify else KFold
        folds = splitter(self.n_folds, shuffle=True, random_state=self.random_state)
        return [
            venn_abers_tables(scores[part], labels[part]) for _, part in folds.split(scores, labels)
        ]

    def _predict_proba(self, logits):
        n, k = logits.shape
        out = np.zeros((n, k))
        for tables, (positive, negative, scores) in zip(
            self.tables_, self._problems(logits), strict=True
        ):
            pairs = [venn_abers_pair(t, scores) for t in tables]
            p0 = np.column_stack([pair[0] for pair in pairs])
            p1 = np.column_stack([pair[1] for pair in pairs])
            p = merge_pairs(p0, p1, loss=self.loss)
            if negative is None:
                out[:, positive] = p
            else:
                # Coupling sums 1 / p_ij over each class's pairs (Manokhin 2017, eq. 5).
                out[:, positive] += 1.0 / p
                out[:, negative] += 1.0 / (1.0 - p)
        if self.multiclass == "one_vs_one":
            out = 1.0 / (out - (k - 2))
        return out / out.sum(axis=1, keepdims=True)


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "venn_abers": (VennAbersCalibrator, {}),
}
