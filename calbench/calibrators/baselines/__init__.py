"""Calibrators with nothing to learn: the uncalibrated baseline and the known true map."""
