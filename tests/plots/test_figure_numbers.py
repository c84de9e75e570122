"""What the per-task figures draw and print is what the data say: the smoothed reliability
curve only where confidences were observed, and a class named once."""

import re

import matplotlib.pyplot as plt
import numpy as np
import pytest

from calbench.metrics import smooth_ece
from calbench.simplex import softmax


def _four_class_scores(rng, n=1500):
    """A 4-class model's scores, somewhat overconfident: every top-label confidence is
    at least 1/4, the lowest ones well above it (as the tour's model_a)."""
    y = rng.integers(0, 4, n)
    z = 1.5 * rng.normal(size=(n, 4))
    z[np.arange(n), y] += 1.5
    return softmax(1.4 * z), y


def _drawn_line(ax) -> np.ndarray:
    """The smoothed accuracy's drawn points, (m, 2): every segment's ends."""
    (line,) = [c for c in ax.collections if c.__class__.__name__ == "LineCollection"]
    return np.concatenate(line.get_segments())


def test_the_smoothed_curve_is_drawn_only_over_the_observed_confidences(rng):
    """The tour's model_a showed a smoothed accuracy of ~0.8 at a confidence of 0.15, where
    a 4-class model has no confidence: beyond the observed range the kernel average is the
    outermost rows' outcomes extrapolated. The line now starts at the smallest observed
    confidence and ends at the largest; smECE, the metric, is unchanged."""
    from calbench.plots.reliability import smooth_reliability_diagram, smoothed_line

    probs, y = _four_class_scores(rng)
    confidence = probs.max(axis=1)
    fig, ax = plt.subplots()
    smooth_reliability_diagram(ax, probs, y, title="m")
    points = _drawn_line(ax)
    assert points[:, 0].min() == pytest.approx(confidence.min())
    assert points[:, 0].max() == pytest.approx(confidence.max())
    assert confidence.min() > 0.25 and (points[:, 0] >= 0.25).all()
    assert ((points[:, 1] >= 0) & (points[:, 1] <= 1)).all()
    # The kernel's curve over all of [0, 1] does reach below the data (the defect).
    curve = smoothed_line(probs, y)
    assert curve["mesh"].min() < confidence.min() and curve["t"].min() == confidence.min()
    # The density is shaded only where confidences can be, and below 1/k is marked as empty.
    (shade,) = [c for c in ax.collections if c.get_label() == "density of confidences"]
    assert shade.get_paths()[0].vertices[:, 0].min() >= 0.25
    assert any("confidence < 1/k (k=4)" in p.get_label() for p in ax.patches)
    smece = float(re.search(r"smECE ([0-9.]+)", ax.get_title()).group(1))
    assert smece == pytest.approx(smooth_ece(probs, y), abs=5e-5)
    plt.close(fig)


def test_the_smoothed_curve_breaks_where_the_floor_would_make_it(rng):
    """Two clusters of confidences far apart: between them the kernel's summed weight falls
    below `NEGLIGIBLE_WEIGHT`, where relplot's 1e-4 density floor would pull the accuracy
    towards 0; the line breaks there instead of dipping."""
    from calbench.plots.reliability import NEGLIGIBLE_WEIGHT, smoothed_line

    n = 400
    low, high = [0.4, 0.35, 0.25], [0.97, 0.02, 0.01]
    probs = np.repeat([low, high], n, axis=0)
    y = np.concatenate([rng.choice(3, n, p=low), rng.choice(3, n, p=high)])
    curve = smoothed_line(probs, y, bandwidth=0.01)
    gap = (curve["t"] > 0.5) & (curve["t"] < 0.9)
    assert np.isnan(curve["line"][gap]).all()
    assert (curve["line_density"][gap] * len(y) < NEGLIGIBLE_WEIGHT).all()
    assert not np.isnan(curve["line"][[0, -1]]).any()


def test_a_class_named_as_its_default_is_named_once(monkeypatch, rng):
    """The synthetic data's classes are called "class 1", "class 2", ...: its panels said
    "class 1 (class 1)"."""
    from types import SimpleNamespace

    import calbench.plots.predictions as predictions

    assert predictions.class_label("class 1") == "class 1"
    assert predictions.class_label(None) == "class 1"
    assert predictions.class_label("cat") == "class 1 (cat)"
    figures = []
    monkeypatch.setattr(predictions, "save_figure", lambda fig, *a: figures.append(fig) or [])
    fold = SimpleNamespace(probs=rng.dirichlet(np.ones(3), size=200), y=rng.integers(0, 3, 200))
    task = predictions.Task("d", "none", {"ts": [fold]}, "h")
    predictions.reliability_figures("e", task, None, ["png"], "e", first_class="class 1")
    reliability = figures[0]
    titles = [ax.get_title() for ax in reliability.axes] + [reliability._suptitle.get_text()]
    assert not any("class 1 (class 1)" in t for t in titles)
    assert "ts: class 1" in titles
    for fig in figures:
        plt.close(fig)
