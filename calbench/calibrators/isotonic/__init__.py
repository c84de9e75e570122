"""Isotonic maps: one-vs-rest isotonic regression, centred isotonic regression, ENIR and
multi-class isotonic regression."""
