"""A tiny stand-in for SGLang used by tests/server: real processes, real HTTP on loopback."""

__version__ = "0.5.9-fake"
