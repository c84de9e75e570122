"""Decision calibration (Zhao et al. 2021)."""
