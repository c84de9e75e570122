"""Conversions between logits and points of the probability simplex: one home for them.

Logits are the one currency between stages. Data that exist only as probabilities travel
as ``log(clip(p))``, which softmaxes back to ``p``.
"""

import contextlib
import functools

import numpy as np

#: Smallest positive float64; Kull et al. clip zero probabilities to it before the log.
TINY = np.finfo(np.float64).tiny


#: Entries from which a fit's row-wise log-softmax runs in torch (`fitting_log_softmax`):
#: its fused kernel is 6 to 9 times numpy's four passes (5000 x 100 float64: 1.1 ms against
#: 10 ms on 2 cores), most of a CIFAR-100 fit's time; below, torch's call overhead wins.
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


def exp_in_place(a: np.ndarray) -> np.ndarray:
    """``exp(a)`` written over ``a`` (float64), in torch from `TORCH_MIN_ENTRIES` (3x numpy's)."""
    rows = _torch_rows(a)
    if rows is not None and rows.data_ptr() == a.ctypes.data:
        with one_torch_thread():
            rows.exp_()
        return a
    return np.exp(a, out=a)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stable for large logits."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax: the log-probabilities that methods on probabilities work on."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def fitting_log_softmax(logits: np.ndarray) -> np.ndarray:
    """`log_softmax` as a fit's inner loop computes it: torch's fused kernel from
    `TORCH_MIN_ENTRIES`. It agrees with `log_softmax` to rounding, not bit for bit, so it
    serves objectives and gradients only; predictions and features use `log_softmax`."""
    z = np.asarray(logits, dtype=np.float64)
    rows = _torch_rows(z)
    if rows is None:
        return log_softmax(z)
    import torch

    with one_torch_thread():
        return torch.log_softmax(rows, dim=1).numpy()


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
    other); a 3-class cell stores its map there (`calbench.runner.predictions`), so
    figures never refit. `split_map` names the parts."""
    return np.vstack(_map_grids())


def split_map(rows: np.ndarray) -> dict[str, np.ndarray]:
    """Rows given at `map_points`, by grid name."""
    ends = np.cumsum([len(grid) for grid in _map_grids()])[:-1]
    return dict(zip(MAP_STEPS, np.split(np.asarray(rows), ends), strict=True))
