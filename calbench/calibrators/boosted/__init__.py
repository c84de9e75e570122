"""Gradient-boosted trees on log-probabilities (CalArena's XGBoost, LightGBM and CatBoost)."""
