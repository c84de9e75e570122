"""Valk 2022: his code's forest, KNN, decision calibration and scipy vector scaling, and
Rahimi et al.'s intra-order-preserving map whose scores he copied, registered beside the
library's methods; and the draws of his random loss matrices (``draws: valk``)."""

from calbench.papers.valk2022.loss_draws import valk_losses
from calbench.papers.valk2022.reference_bfgs import BFGSVectorScaling
from calbench.papers.valk2022.reference_dec import ValkDecisionCalibration
from calbench.papers.valk2022.reference_forest import ValkRandomForest
from calbench.papers.valk2022.reference_iop import RahimiDiagonal
from calbench.papers.valk2022.reference_knn import ValkNeighbours

CALIBRATORS = {
    "bfgs_vs": (BFGSVectorScaling, {}),
    "valk_forest": (ValkRandomForest, {}),
    "valk_knn": (ValkNeighbours, {}),
    "valk_dec": (ValkDecisionCalibration, {}),
    "rahimi_iop_diag": (RahimiDiagonal, {}),
}

#: ``average_loss_gap``'s ``draws: valk``: the matrices of his tables.
LOSS_DRAWS = {"valk": valk_losses}
