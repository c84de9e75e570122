"""Conversions between logits and points of the probability simplex: one home for them.

Logits are the one currency between stages. Data that exist only as probabilities travel
as ``log(clip(p))``, which softmaxes back to ``p``.
"""

import contextlib
import functools

import numpy as np

#: Smallest positive float64; Kull et al. clip zero probabilities to it before the log.
TINY = np.finfo(np.float64).tiny

#: Where a fit's log-probabilities are floored before exp(): exp(-700) is still a normal
#: float, and below it exp() would return subnormals, which slow every later product by an
#: order of magnitude (they weigh nothing in a gradient).
EXP_FLOOR = -700.0


#: Entries from which a fit's row-wise softmax runs in torch (`fitting_softmax`): its fused
#: kernel is several times numpy's passes (numpy's float64 exp is scalar without AVX-512),
#: most of a CIFAR-100 fit's time; below, torch's call overhead wins.
TORCH_MIN_ENTRIES = 100_000


def _torch_rows(z: np.ndarray):
    """``z`` as a float64 torch tensor sharing its memory, where torch pays off, else None."""
    if z.ndim != 2 or z.size < TORCH_MIN_ENTRIES:
        return None
    import torch

    return torch.from_numpy(np.ascontiguousarray(z))


@contextlib.contextmanager
def one_torch_thread():
    """torch on one thread for the duration: the fits interleave these row-wise kernels
    with BLAS products, and OpenBLAS's spinning threads and torch's fight over the cores
    (SMS on 5000 x 100: 2.1 s with both on two threads, 0.45 s with one BLAS thread)."""
    import torch

    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before != 1:
            torch.set_num_threads(before)


#: Classes from which `softmax` runs in torch: its fused kernel is 2.6x numpy's passes
#: (5000 x 100 float64: 3.0 ms against 7.8 ms). Decided by the row length alone, so a
#: row's probabilities do not depend on how many rows are predicted with it; below it
#: (every 10-class network, every UCI set) numpy's, bit for bit as before.
TORCH_MIN_CLASSES = 64


def _wide_rows(z: np.ndarray) -> bool:
    return z.ndim == 2 and z.shape[1] >= TORCH_MIN_CLASSES


def log_in_place(a: np.ndarray) -> np.ndarray:
    """``log(a)`` written over a C-contiguous float64 ``a``: in torch for rows of
    `TORCH_MIN_CLASSES` or more (2.5x numpy's scalar log), as `softmax` decides."""
    if _wide_rows(a) and a.flags.c_contiguous and a.dtype == np.float64:
        import torch

        with one_torch_thread():
            torch.from_numpy(a).log_()
        return a
    return np.log(a, out=a)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stable for large logits."""
    z = np.asarray(logits, dtype=np.float64)
    if _wide_rows(z):
        import torch

        with one_torch_thread():
            return torch.softmax(torch.from_numpy(np.ascontiguousarray(z)), dim=1).numpy()
    z = z - z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def softmax_over(z: np.ndarray) -> np.ndarray:
    """`softmax` of an array the caller no longer needs, written over it where `softmax`
    runs torch's kernel (C-contiguous float64 rows of `TORCH_MIN_CLASSES` or more: the
    same kernel, so the same numbers), else `softmax`'s new array. SVS's and SMS's
    features then hold one (n, k) array beside the logits, not two (at 10,000 classes on
    25,000 rows, 1.9 GB fewer)."""
    if _wide_rows(z) and z.flags.c_contiguous and z.dtype == np.float64:
        import torch

        rows = torch.from_numpy(z)
        with one_torch_thread():
            torch._softmax(rows, 1, False, out=rows)
        return z
    return softmax(z)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax: the log-probabilities that methods on probabilities work on."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def fitting_softmax(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray] | None:
    """A fit's inner loop: ``(mean -log softmax(logits)[i, y_i], softmax(logits))`` from
    torch's fused softmax on one thread, from `TORCH_MIN_ENTRIES` (5000 x 100 float64: one
    3 ms pass, where a log-softmax and an exponential were two of 2 to 3 ms each). None
    below it: the caller's numpy path keeps its bits. It agrees with `log_softmax` to
    rounding, so it serves objectives and gradients only (`torch_softmax_log_loss`)."""
    z = np.asarray(logits, dtype=np.float64)
    rows = _torch_rows(z)
    if rows is None:
        return None
    with fitting_threads(z.size):
        value, probs = torch_softmax_log_loss(rows, y)
    return value, probs.numpy()


#: Entries from which `fitting_softmax` runs on all of torch's threads.
LARGE_PASS = 5_000_000


def fitting_threads(entries: int):
    """torch's threads for a fit's pass over ``entries`` logits: one beside the fits'
    products, except where the pass itself is long enough to share out (`LARGE_PASS`;
    25,000 x 1,000: 0.42 s on one thread)."""
    return contextlib.nullcontext() if entries >= LARGE_PASS else one_torch_thread()


def torch_softmax_log_loss(logits, y, in_place=False) -> tuple[float, object]:
    """``(mean -log softmax(logits)[i, y_i], softmax(logits))`` for a float64 torch tensor;
    with ``in_place``, the probabilities written over ``logits`` (the same numbers: torch's
    softmax kernel reads a row before it writes it; at 25,000 x 1,000 an array of 200 MB
    fewer at a fit's peak).

    Probabilities below ``exp(EXP_FLOOR)`` are raised to it, so that no subnormal slows
    later products; a label's log-probability comes from the logits themselves wherever its
    probability is that small (the rounded probability would lose it).
    """
    import torch

    index = torch.arange(len(y), device=logits.device)
    label = torch.as_tensor(y, device=logits.device)
    rows, kept = None, None
    if in_place:
        # A label's probability is at least exp(its logit - the row's largest) / k: only
        # rows whose gap passes EXP_FLOOR + ln k can need their logits afterwards.
        gap = logits[index, label] - logits.amax(dim=1)
        rows = torch.nonzero(gap <= EXP_FLOOR + np.log(logits.shape[1]) + 1.0)[:, 0]
        kept = logits[rows]
        probs = torch._softmax(logits, 1, False, out=logits)
    else:
        probs = torch.softmax(logits, dim=1)
    floor = float(np.exp(EXP_FLOOR))
    if float(probs.min()) < floor:
        probs.clamp_(min=floor)
    log_label = probs[index, label].log()
    small = log_label <= EXP_FLOOR
    if bool(small.any()):
        if in_place:  # the kept rows' logits, in their order (a superset of the small)
            kept, small_rows = kept[small[rows]], small.nonzero()[:, 0]
        else:
            kept, small_rows = logits[small], small
        log_label[small_rows] = torch.log_softmax(kept, dim=1)[
            torch.arange(len(kept), device=logits.device), label[small_rows]
        ]
    return -float(log_label.mean()), probs


def device_softmax_log_loss(logits, y) -> tuple[object, object]:
    """`torch_softmax_log_loss` for a GPU, without reading the device: the loss a 0-d
    tensor, each label's log-probability from ``log_softmax`` (no branch on its size), in
    two passes over ``logits`` (on an H100 at 20,000 x 1,000 each pass takes 0.13 ms, and
    ``logsumexp`` alone took 0.47 ms). No floor: a GPU multiplies subnormals at full
    speed, and probabilities below exp(-700) weigh nothing in a gradient."""
    import torch

    log_probs = torch.log_softmax(logits, dim=1)
    return -log_probs.gather(1, y[:, None]).mean(), log_probs.exp_()


def probs_to_logits(probs: np.ndarray) -> np.ndarray:
    """``log(clip(p))``: the logits of data given as probabilities."""
    return np.log(np.clip(np.asarray(probs, dtype=np.float64), TINY, None))


def float32_softmax(logits: np.ndarray) -> np.ndarray:
    """The softmax as a benchmark that stores float32 probabilities computes it (CalArena's
    generate_cv_benchmarks.py): in float32 where the logits are float32 values (as the
    published pickles'), else in float64; the result rounded to float32."""
    z = np.asarray(logits)
    narrow = z.astype(np.float32)
    if np.array_equal(narrow.astype(z.dtype), z):
        z = narrow
    z = z - z.max(axis=1, keepdims=True)
    with np.errstate(under="ignore"):
        e = np.exp(z)
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def global_max_softmax(scores: np.ndarray) -> np.ndarray:
    """The softmax minus the largest score of the whole array, not of each row, in the
    scores' own precision (Kull et al.'s experiments_dnn code, which Valk's builds on): rows
    far below the array's top can underflow to 0, and a row that underflows whole is
    ``0 / 0`` (NaN), as theirs was."""
    e = np.exp(scores - np.max(scores))
    with np.errstate(invalid="ignore"):
        return e / e.sum(axis=1, keepdims=True)


def simplex_grid(step: float) -> np.ndarray:
    """Points of the 3-class simplex on a regular barycentric grid, strictly inside it."""
    ticks = np.arange(step / 2, 1.0, step)
    a, b = np.meshgrid(ticks, ticks)
    a, b = a.ravel(), b.ravel()
    inside = a + b < 1.0 - step / 4
    return np.column_stack([a[inside], b[inside], 1.0 - a[inside] - b[inside]])


#: A simplex map's two grids (Valk Fig. 5): the coloured background and the arrows.
MAP_STEPS = {"background": 1 / 120, "arrows": 1 / 14}


@functools.cache
def _map_grids() -> tuple[np.ndarray, ...]:
    grids = tuple(simplex_grid(step) for step in MAP_STEPS.values())
    for grid in grids:
        grid.setflags(write=False)  # shared by every caller
    return grids


def map_points() -> np.ndarray:
    """The points a simplex map evaluates a calibration map at (its grids, one after the
    other); a 3-class cell stores its map there (`calbench.results.predictions`), so
    figures never refit. `split_map` names the parts."""
    return np.vstack(_map_grids())


def split_map(rows: np.ndarray) -> dict[str, np.ndarray]:
    """Rows given at `map_points`, by grid name."""
    ends = np.cumsum([len(grid) for grid in _map_grids()])[:-1]
    return dict(zip(MAP_STEPS, np.split(np.asarray(rows), ends), strict=True))
