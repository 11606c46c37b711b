"""Stand-in `sglang` package of specdoctor's simulated GPU host (no GPU: timings come from a model)."""

from .version import __version__

__all__ = ["__version__"]
