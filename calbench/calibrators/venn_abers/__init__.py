"""Venn-Abers predictors, inductive and cross, multiclass."""
