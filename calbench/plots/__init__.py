"""Figures: reliability diagrams, 3-class simplex maps, critical-difference diagrams.

Every function draws on a matplotlib ``Axes`` it is given; `calbench.plots.write` lays out
the papers' figures and writes PNG and PDF under ``results/figures``.
"""
