"""vLLM stand-in of the twin: what a vLLM box imports; its server speaks 0.26's processes, routes and log lines."""

from .version import __version__

__all__ = ["__version__"]
