"""Scaling maps: temperature, bias-corrected temperature and vector scaling, ensemble
temperature scaling, beta calibration and the logistic maps of one score (Platt,
quadratic, scaling-binning)."""
