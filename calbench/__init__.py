"""calbench: reproducible benchmarks of post-hoc calibration for multi-class classifiers."""

__version__ = "0.1.0"
