"""Hoki: confidence calibration from random logit transformations (Jang et al., secs. 4-6).

M noise vectors eps_m (one draw of k values each, shared by all examples) perturb the
logits; gamma_n is the share of them that leave example n's predicted class unchanged.
Within each confidence bin j, alpha_j (beta_j) is the accuracy of the pairs (n, m) whose
label stayed (switched), eqs. (1)-(2), and the calibrated confidence is
p_n = (alpha_j - beta_j) gamma_n + beta_j, eq. (4). Algorithm 1 starts every p_n at the
validation accuracy (or, ``init="confidence"``, at the classifier's own confidence, Hoki
Table 9), bins, re-estimates, and repeats until the bins stop changing; Algorithm 2 replays
the stored (alpha, beta) of every iteration on new data.

The transformation is chosen by grid search for the largest standard deviation of p over
the fitting data with a single bin (sec. 5). A location shift of the noise (the Gaussian
mean, the uniform lower end) moves all k logits together and cannot change an argmax, so
only the spread is searched: Gaussian standard deviations and uniform widths over the
paper's (0, 20]. The search runs on at most ``search_size`` seeded examples.

Hoki calibrates the top-1 confidence only; the other classes share the remaining mass in
their original proportions (`replace_top`, which keeps every predicted class).
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import Choice
from calbench.errors import CalbenchError
from calbench.simplex import softmax


def replace_top(probs: np.ndarray, top_values: np.ndarray) -> np.ndarray:
    """Set each row's top probability to ``top_values``; scale the others to fill the rest.

    A top value so low that a rescaled runner-up would overtake it, ``c < p2 / (r + p2)`` with
    r the other classes' mass,
    is raised just above that bound, so the predicted class (and accuracy) never changes.
    """
    rows = np.arange(len(probs))
    top = probs.argmax(axis=1)
    # The others' mass summed directly: 1 - p1 cancels catastrophically when p1 is near 1.
    rest = probs.sum(axis=1, where=np.arange(probs.shape[1]) != top[:, None])
    p2 = np.sort(probs, axis=1)[:, -2]
    bound = p2 / np.maximum(rest + p2, np.finfo(float).tiny)
    # 1e-12 above the bound survives the rescaling's rounding, where one ulp did not.
    top_values = np.where(top_values > bound + 1e-12, top_values, bound + 1e-12)
    top_values = np.minimum(top_values, 1.0)
    # (Near) one-hot rows, whose other mass is below any usable scale (subnormal or 0),
    # spread the freed mass evenly over the other classes instead.
    lone = rest < 1e-300
    out = probs * ((1.0 - top_values) / np.where(lone, 1.0, rest))[:, None]
    out[rows, top] = top_values
    if lone.any():
        k = probs.shape[1]
        out[lone] = ((1.0 - top_values[lone]) / (k - 1))[:, None]
        out[rows[lone], top[lone]] = top_values[lone]
    return out


#: Spreads searched (Gaussian sigma, uniform width), over the paper's (0, 20].
DEFAULT_SPREADS = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0)


def draw_noise(family: str, spread: float, n_transforms: int, n_classes: int, seed: int):
    """M noise vectors of the family with the given spread (location 0), shape (M, k)."""
    rng = np.random.default_rng(seed)
    if family == "gaussian":
        return spread * rng.standard_normal((n_transforms, n_classes))
    return spread * rng.random((n_transforms, n_classes))


def unchanged_fraction(logits: np.ndarray, noise: np.ndarray, block: int = 128) -> np.ndarray:
    """gamma_n: the share of noise vectors after which argmax(z_n + eps_m) is still argmax z_n.

    Exact. A class j can overtake the predicted class c in some draw only if
    z_j + max_m eps_mj > z_c + min_m eps_mc; only such rivals are visited, strongest first.
    Rows are taken in blocks (sorted by their number of rivals, so a block's rivals overlap)
    and the running maximum of z_j + eps_mj over the rivals seen so far is kept as a
    (rows x draws) array small enough to stay in cache, one class at a time. A block stops
    early once every draw is decided: lost (a rival already beats c) or won (c beats what
    is left, z_j + max_m eps_mj over the remaining rivals).

    The perturbed logits are formed in float32, the precision networks emit logits in (twice
    as fast; a decision can differ from float64 only where two perturbed logits tie to 1e-7).
    """
    logits = np.asarray(logits, dtype=np.float32)
    noise = np.asarray(noise, dtype=np.float32)
    n, k = logits.shape
    rows = np.arange(n)
    top = logits.argmax(axis=1)
    noise_t = np.ascontiguousarray(noise.T)  # (k, M): one class's draws contiguous
    floor = logits[rows, top] + noise.min(axis=0)[top]
    reach = logits + noise.max(axis=0)[None, :]
    reach[rows, top] = -np.inf
    rival = reach > floor[:, None]
    order = np.argsort(rival.sum(axis=1), kind="stable")
    gamma = np.ones(n)
    for s in range(0, n, block):
        idx = order[s : s + block]
        cols = np.flatnonzero(rival[idx].any(axis=0))
        if not len(cols):
            continue  # no class can ever overtake: gamma = 1
        block_reach = reach[idx][:, cols]
        sort = np.argsort(-block_reach.max(axis=0), kind="stable")
        cols = cols[sort]
        # What the rivals not yet visited could reach at most, per row.
        left = np.maximum.accumulate(block_reach[:, sort][:, ::-1], axis=1)[:, ::-1]
        left = np.concatenate([left, np.full((len(idx), 1), -np.inf)], axis=1)
        z = logits[idx]
        own = z[np.arange(len(idx)), top[idx], None] + noise_t[top[idx]]  # (b, M)
        best = np.full_like(own, -np.inf)
        tmp = np.empty_like(own)
        for t, j in enumerate(cols):  # a row whose own class is j meets its own score only
            np.add(z[:, j, None], noise_t[j], out=tmp)
            np.maximum(best, tmp, out=best)
            if t % 8 == 7 and ((best > own) | (own >= left[:, t + 1, None])).all():
                break
        gamma[idx] = (own >= best).mean(axis=1)
    return gamma


def _bin_of(p, n_bins):
    return np.minimum((p * n_bins).astype(np.int64), n_bins - 1)


def _alpha_beta(correct, gamma, bins, n_bins):
    """Eqs. (1)-(2) per bin, in shares of the M draws; Hoki's rule where a group is empty."""
    count = np.bincount(bins, minlength=n_bins).astype(np.float64)
    stay = np.bincount(bins, weights=gamma, minlength=n_bins)
    stay_right = np.bincount(bins, weights=gamma * correct, minlength=n_bins)
    switch = count - stay
    switch_right = np.bincount(bins, weights=(1 - gamma) * correct, minlength=n_bins)
    accuracy = np.divide(
        stay_right + switch_right, count, out=np.full(n_bins, np.nan), where=count > 0
    )
    # All labels stay or all switch (c = 0 or c = M|I|): alpha = beta = bin accuracy.
    degenerate = (stay <= 0) | (switch <= 0)
    alpha = np.where(degenerate, accuracy, stay_right / np.where(stay > 0, stay, 1.0))
    beta = np.where(degenerate, accuracy, switch_right / np.where(switch > 0, switch, 1.0))
    return alpha, beta


class HokiCalibrator(Calibrator):
    """Hoki et al.'s transformation-noise calibrator (module docstring): the noise family and
    spread chosen on the calibration data, then each confidence bin moved towards its
    accuracy over ``max_iter`` design-time iterations.

    Parameters
    ----------
    family : {"search", "gaussian", "uniform"}
        The noise family; "search" tries both over ``spreads`` (Hoki sec. 5).
    spread : float or None
        Gaussian sigma or uniform width when fixed; None searches ``spreads``.
    n_transforms : int
        M, the number of noise vectors (1000 in the paper).
    n_bins : int
        J equal-width confidence bins of the partition (15, as the ECE).
    max_iter : int
        K, the most design-time iterations.
    init : {"accuracy", "confidence"}
        Start from the validation accuracy (the paper) or each example's own confidence.
    search_size : int
        Examples used by the transformation search (a seeded subsample).
    seed : int
    spreads : sequence of float
        The spreads the search tries (Hoki sec. 5).
    """

    _parameter_constraints = {
        "family": Choice("search", "gaussian", "uniform"),
        "init": Choice("accuracy", "confidence"),
    }

    def __init__(
        self,
        family="search",
        spread=None,
        n_transforms=1000,
        n_bins=15,
        max_iter=100,
        init="accuracy",
        spreads=DEFAULT_SPREADS,
        search_size=1000,
        seed=0,
    ):
        self.family = family
        self.spread = spread
        self.n_transforms = n_transforms
        self.n_bins = n_bins
        self.max_iter = max_iter
        self.init = init
        self.spreads = spreads
        self.search_size = search_size
        self.seed = seed

    def _noise(self, family, spread, k):
        return draw_noise(family, spread, self.n_transforms, k, self.seed)

    def _search(self, logits, correct):
        """The (family, spread) whose single-bin p has the largest standard deviation."""
        rng = np.random.default_rng(self.seed)
        if len(logits) > self.search_size:
            pick = rng.choice(len(logits), self.search_size, replace=False)
            logits, correct = logits[pick], correct[pick]
        families = ("gaussian", "uniform") if self.family == "search" else (self.family,)
        spreads = self.spreads if self.spread is None else (self.spread,)
        best = (-1.0, None, None)
        zeros = np.zeros(len(logits), dtype=np.int64)
        for family in families:
            unit = self._noise(family, 1.0, logits.shape[1])  # the same draws at every spread
            for spread in spreads:
                gamma = unchanged_fraction(logits, spread * unit)
                alpha, beta = _alpha_beta(correct, gamma, zeros, 1)
                std = float(np.std((alpha[0] - beta[0]) * gamma + beta[0]))
                if std > best[0]:
                    best = (std, family, float(spread))
        return best

    def _start(self, logits, n):
        if self.init == "accuracy":
            return np.full(n, self.accuracy_)
        return softmax(logits).max(axis=1)

    def _fit(self, logits, y):
        if self.spread is not None and not self.spread > 0:
            raise CalbenchError(f"hoki: spread must be positive; got {self.spread}.")
        correct = (logits.argmax(axis=1) == y).astype(np.float64)
        self.accuracy_ = float(correct.mean())
        self.sigma_, self.family_, self.spread_ = self._search(logits, correct)
        self.noise_ = self._noise(self.family_, self.spread_, logits.shape[1])
        gamma = unchanged_fraction(logits, self.noise_)
        p = self._start(logits, len(y))
        steps, previous = [], None
        for _ in range(self.max_iter):
            bins = _bin_of(p, self.n_bins)
            if previous is not None and np.array_equal(bins, previous):
                break  # the partition no longer changes
            alpha, beta = _alpha_beta(correct, gamma, bins, self.n_bins)
            p = (alpha[bins] - beta[bins]) * gamma + beta[bins]
            steps.append((alpha, beta))
            previous = bins
        self.alphas_ = np.array([a for a, _ in steps])  # (K*, J); NaN where a bin was empty
        self.betas_ = np.array([b for _, b in steps])
        self.n_iter_ = len(steps)

    def predict_confidence(self, logits) -> np.ndarray:
        """Algorithm 2: the calibrated top-1 confidence of each row."""
        gamma = unchanged_fraction(logits, self.noise_)
        p = self._start(logits, len(logits))
        for alpha, beta in zip(self.alphas_, self.betas_, strict=True):
            bins = _bin_of(p, self.n_bins)
            a, b = alpha[bins], beta[bins]
            known = ~np.isnan(a)  # a bin empty at design time leaves p where it is
            p = np.where(known, (a - b) * gamma + b, p)  # NaN arithmetic is quiet
        return p

    def _predict_proba(self, logits):
        return replace_top(softmax(logits), self.predict_confidence(logits))


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "hoki": (HokiCalibrator, {}),
}
