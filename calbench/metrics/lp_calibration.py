r"""Variational Lp calibration error and its over-/under-confidence split (Berta et al.
2026), as ``probmetrics`` 1.3.0 defines them with its ``ts-mix_all`` estimator.

The recalibrated map :math:`g = \mathrm{TS}_f(f)` is temperature scaling fitted on the
scored predictions :math:`f` themselves and mixed with the uniform distribution at
:math:`1/(n+1)` (`calbench.metrics.refinement.temperature_scaled_on_itself`, the same map
as `calibration_log_loss`). The proper loss centred at :math:`f(x)`,
:math:`\ell_f(g, y) = h(g) + \langle \nabla h(g), y - g\rangle` with
:math:`h(g) = -\lVert g - f\rVert_p`, is 0 at :math:`g = f`; the calibration error is what
:math:`g` removes from it, which (Hölder's equality
:math:`\langle w, g - f\rangle = \lVert g - f\rVert_p`) is the variational form

.. math::

    \mathrm{CE}_p = \frac1n \sum_i \langle w_i, y_i - f_i\rangle, \qquad
    w_i = \frac{\operatorname{sign}(d_i)\,|d_i|^{p-1}}{\lVert d_i\rVert_p^{p-1}},
    \quad d_i = g_i - f_i,

the witness :math:`w` the unit dual-norm direction from :math:`f` to :math:`g` (for
:math:`p = \infty` the sign of the largest coordinate of :math:`d`, 0 where :math:`d = 0`).
With two classes it is taken on class 1's probability alone (probmetrics' default,
``binary_as_multiclass=False``), where every p gives
:math:`\frac1n\sum_i \operatorname{sign}(g_i - f_i)(y_i - f_i)`.

Over- and under-confidence take the top class of :math:`f` as a binary problem and clip
:math:`g`'s top-class probability towards :math:`f`'s, from 0.5 outwards:

- over: :math:`g' = \min(g, f)` where :math:`f > 1/2`, :math:`\max(g, f)` where
  :math:`f < 1/2` (only where :math:`f` is further from 1/2 than :math:`g`, so the
  prediction is more confident than its recalibration);
- under: :math:`\max` and :math:`\min` swapped; :math:`g' = 1/2` where :math:`f = 1/2`;

each then the 1-D error above, :math:`\frac1n\sum_i \operatorname{sign}(g'_i - f_i)
(o_i - f_i)` with :math:`o_i` whether the label is the top class. Their sum is the top-class
error wherever no confidence is exactly 1/2.

probmetrics 1.3.0 slices the prediction and the label to class 1 for a binary problem but
not the centre :math:`f(x)`, which broadcasts against both of its columns. Its binary
``proper-L2``/``-Linf`` values and its top-class over-confidence where :math:`g'` passes
:math:`1 - f` therefore differ from this definition (tests/metrics/test_lp_calibration.py
writes the difference out); everywhere else the two agree to float64 rounding.
"""

from __future__ import annotations

import numpy as np

from calbench.errors import CalbenchError
from calbench.metrics._checks import probs_and_labels
from calbench.metrics.refinement import temperature_scaled_on_itself


def _witness(d: np.ndarray, p: float) -> np.ndarray:
    """The unit dual-norm direction of each row of ``d`` (0 for a zero row)."""
    if np.isinf(p):
        rows = np.arange(len(d))
        largest = np.abs(d).argmax(axis=1)
        w = np.zeros_like(d)
        w[rows, largest] = np.sign(d[rows, largest])
        return w
    norm = np.linalg.norm(d, ord=p, axis=1, keepdims=True)
    # |d|^(p-1) / ||d||^(p-1) as one power keeps p = 1 at sign(d) without 0 ** 0 questions
    ratio = np.abs(d) / np.where(norm > 0, norm, 1.0)
    return np.sign(d) * ratio ** (p - 1)


def _check_p(p, owner: str) -> float:
    try:
        value = float(p)
    except (TypeError, ValueError):
        value = np.nan
    if not value >= 1:  # also refuses NaN
        raise CalbenchError(
            f"The 'p' parameter of {owner} must be a number >= 1 or inf. Got {p!r}."
        )
    return value


def lp_calibration_error(probs, y, p=2, binary_as_multiclass=False) -> float:
    r"""Berta et al.'s variational Lp calibration error (module docstring): the mean of
    :math:`\langle w_i, y_i - f_i\rangle`, :math:`w` the dual direction from the predictions
    to their temperature scaling fitted on themselves.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    p : float
        Order of the norm, at least 1 (``float("inf")`` for the max norm).
    binary_as_multiclass : bool
        With two classes: False (probmetrics' default) takes class 1's probability alone,
        True both columns.

    Returns
    -------
    float
        Lower is better; near 0 (slightly negative possible) when temperature scaling
        changes nothing, in [-2, 2]. probmetrics' ``calib-err_proper-L{p}_ts-mix_all``.
    """
    owner = "lp_calibration_error"
    order = _check_p(p, owner)
    f, y = probs_and_labels(probs, y, owner)
    g = temperature_scaled_on_itself(f, y)
    onehot = np.eye(f.shape[1])[y]
    if f.shape[1] == 2 and not binary_as_multiclass:
        f, g, onehot = f[:, 1:], g[:, 1:], onehot[:, 1:]
    return float((_witness(g - f, order) * (onehot - f)).sum(axis=1).mean())


def _top_class_terms(probs, y, owner: str, direction: str) -> np.ndarray:
    """Each sample's over- or under-confidence term (module docstring)."""
    p, y = probs_and_labels(probs, y, owner)
    g = temperature_scaled_on_itself(p, y)
    rows = np.arange(len(y))
    top = p.argmax(axis=1)
    f, g_top = p[rows, top], g[rows, top]
    towards, away = (np.minimum, np.maximum) if direction == "over" else (np.maximum, np.minimum)
    clipped = np.where(f > 0.5, towards(g_top, f), np.where(f < 0.5, away(g_top, f), 0.5))
    return np.sign(clipped - f) * ((y == top) - f)


def overconfidence_error(probs, y) -> float:
    r"""Berta et al.'s over-confidence error: the top-class L1 calibration error where the
    prediction is further from 1/2 than its temperature scaling (module docstring).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.

    Returns
    -------
    float
        Lower is better, in [-1, 1]; probmetrics'
        ``calib-err_topclass-over-proper-L1-binary-as-1d_ts-mix_all``.
    """
    return float(_top_class_terms(probs, y, "overconfidence_error", "over").mean())


def underconfidence_error(probs, y) -> float:
    r"""Berta et al.'s under-confidence error: the top-class L1 calibration error where the
    prediction is nearer 1/2 than its temperature scaling (module docstring).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.

    Returns
    -------
    float
        Lower is better, in [-1, 1]; probmetrics'
        ``calib-err_topclass-under-proper-L1-binary-as-1d_ts-mix_all``.
    """
    return float(_top_class_terms(probs, y, "underconfidence_error", "under").mean())
