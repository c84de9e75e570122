"""``precision="float32"`` of the full-matrix maps' preconditioned L-BFGS: an explicit
option whose fit stays within 1e-4 of the float64 fit's log-loss, while the default path
(float64) is the same fit, bit for bit, as without the option."""

import numpy as np
import pytest

from calbench.calibrators import make_calibrator
from calbench.calibrators.solvers import preconditioned
from calbench.metrics.scoring import log_loss
from calbench.simplex import softmax


def _fifty_classes(seed=0, n=3000, k=50):
    """Seeded over-confident logits beyond Newton's 36 classes: calibration and test."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(2 * n, k))
    u[np.arange(2 * n), rng.integers(0, k, 2 * n)] += np.log(k) + 1.5
    y = (rng.random((2 * n, 1)) > softmax(u).cumsum(axis=1)).sum(axis=1).clip(max=k - 1)
    z = 2.5 * u + rng.normal(scale=0.5, size=k)
    return z[:n], y[:n], z[n:], y[n:]


@pytest.mark.parametrize("method", ["sms", "ms_odir"])
def test_float32_products_keep_the_log_loss_within_1e4(method):
    zc, yc, zt, yt = _fifty_classes()
    wide = make_calibrator(method).fit(zc, yc)
    narrow = make_calibrator(method, precision="float32").fit(zc, yc)
    assert narrow.n_iter_ > 0 and narrow.gradient_max_ <= 1e-6
    assert abs(narrow.loss_ - wide.loss_) < 1e-8
    held_out = [log_loss(m.predict_proba(zt), yt) for m in (wide, narrow)]
    assert abs(held_out[1] - held_out[0]) < 1e-4
    np.testing.assert_allclose(narrow.coef_, wide.coef_, atol=1e-3)


def test_the_default_precision_is_the_float64_fit_bit_for_bit(monkeypatch):
    """The default builds float64 features only, and its fit equals the fit asked for
    float64 by name to the last bit."""
    dtypes = []
    data_tensors = preconditioned._data_tensors

    def recording(*args):
        tensors = data_tensors(*args)
        dtypes.append(tensors[0].dtype)
        return tensors

    monkeypatch.setattr(preconditioned, "_data_tensors", recording)
    zc, yc, zt, _ = _fifty_classes(seed=1)
    plain = make_calibrator("sms").fit(zc, yc)
    named = make_calibrator("sms", precision="float64").fit(zc, yc)
    import torch

    assert dtypes == [torch.float64, torch.float64]
    assert np.array_equal(plain.coef_, named.coef_)
    assert np.array_equal(plain.intercept_, named.intercept_)
    assert plain.loss_ == named.loss_ and plain.n_iter_ == named.n_iter_
    assert np.array_equal(plain.predict_proba(zt), named.predict_proba(zt))


def test_float32_runs_as_an_option_declared_like_the_others():
    zc, yc, _, _ = _fifty_classes(n=400)
    with pytest.raises(Exception, match="precision"):
        make_calibrator("sms", precision="float16").fit(zc, yc)
