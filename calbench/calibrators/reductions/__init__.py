"""Reductions of a multiclass calibration to binary maps: top-versus-all."""
