"""Kull et al. 2019: the Keras-trained layers of their experiments_dnn code and the fixed
diagonal of their UCI study's temperature scaling, registered beside the library's
methods, and the reader of their 20 UCI files (``loader: kull_uci``, the sets
``dataset=uci_*``)."""

from calbench.papers.kull2019.keras_style import KerasStyleScaling
from calbench.papers.kull2019.reference_fixdiag import KullFixedDiagonal
from calbench.papers.kull2019.uci_files import load_kull_uci

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

LOADERS = {"kull_uci": load_kull_uci}
