"""The pinned float32 arithmetic of CalArena's MS and SMS replicas: the child runs torch's
AVX2 kernels on two threads, and a fit gives the same bits whatever the caller's threads."""

import numpy as np
import pytest

from calbench.calibrators.pinned_arithmetic import arithmetic, can_pin, pinned
from calbench.errors import CalbenchError

pytestmark = pytest.mark.skipif(not can_pin(), reason="this CPU has no AVX2 kernels to pin")


def test_the_child_runs_avx2_kernels_on_two_threads():
    assert pinned(arithmetic) == ("AVX2", 2)


def test_a_float32_fit_does_not_depend_on_the_callers_threads():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchmin")
    from calbench.calibrators.calarena import fit_float32_matrix_scaling

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(600, 4)) * 3
    y = rng.integers(0, 4, size=600)
    before = torch.get_num_threads()
    try:
        fits = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            fits.append(pinned(fit_float32_matrix_scaling, logits, y))
    finally:
        torch.set_num_threads(before)
    (m1, b1, ok1), (m2, b2, ok2) = fits
    assert ok1 and ok2
    assert np.array_equal(m1, m2) and np.array_equal(b1, b2)
    assert not np.allclose(m1, np.eye(4))  # a fit, not the identity it starts from


def test_a_failing_fit_names_itself_and_its_reason():
    with pytest.raises(CalbenchError, match=r"int: .*invalid literal"):
        pinned(int, "not a number")
