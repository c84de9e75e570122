"""Binning maps: histogram binning (equal width, equal mass, smoothed, CalArena's prior fallback)
and Bayesian binning into quantiles."""
