"""Kull et al. 2019: the Keras-trained layers of their experiments_dnn code and the fixed
diagonal of their UCI study's temperature scaling, registered beside the library's
methods."""

from calbench.papers.kull2019.keras_style import KerasStyleScaling
from calbench.papers.kull2019.reference_fixdiag import KullFixedDiagonal

CALIBRATORS = {
    # Their Keras-trained layers: their reference procedure, not the optimum.
    "keras_vs": (
        KerasStyleScaling,
        {"structure": "vector", "regularization": "none", "double_fit": False},
    ),
    "keras_ms": (KerasStyleScaling, {"structure": "matrix", "input_space": "logits"}),
    "keras_dir": (KerasStyleScaling, {"structure": "matrix", "input_space": "probabilities"}),
    "fixdiag_ts_kull": (KullFixedDiagonal, {}),
}
