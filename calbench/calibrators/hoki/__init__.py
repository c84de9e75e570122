"""Hoki: confidence calibration from random logit transformations (Jang et al.)."""
