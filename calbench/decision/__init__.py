"""Loss matrices, Bayes decisions and risks (Ho 2.5.7-2.7, eqs. 2.18-2.20).

A loss matrix ``L`` has shape (n_classes, n_actions): ``L[y, d]`` is the cost of action d
when the label is y. Actions may differ from classes (a reject option adds a column).
"""

from calbench.decision import risk
from calbench.decision.losses import (
    LOSSES,
    c100_dangerous,
    check_loss_matrix,
    convex_loss,
    fungi_buy,
    ham10000_treat,
    make_loss,
    zero_one,
    zero_one_reject,
)
from calbench.decision.risk import bayes_decisions, empirical_risk, model_risk, true_risk

__all__ = [
    "LOSSES",
    "bayes_decisions",
    "c100_dangerous",
    "check_loss_matrix",
    "convex_loss",
    "empirical_risk",
    "fungi_buy",
    "ham10000_treat",
    "make_loss",
    "model_risk",
    "risk",
    "true_risk",
    "zero_one",
    "zero_one_reject",
]
