"""Spline recalibration: Gupta et al.'s gap spline (ranked scores, and CalArena's CDF-Spline)
and Lucena's spline."""
