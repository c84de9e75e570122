"""Intra order-preserving calibration maps (Rahimi et al. 2020)."""
