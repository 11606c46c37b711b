"""specdoctor: diagnoses speculative-decoding performance regressions on SGLang GPU servers."""

__version__ = "0.1.0"

__all__ = ["__version__"]
