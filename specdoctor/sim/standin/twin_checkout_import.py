"""The twin's stand-in runs whichever SGLang (or vLLM) checkout a process imports (its path is what the model reads).

A real checkout's python/sglang is runnable; the twin's checkouts hold SGLang's sources without their
dependencies. Installed in the sandbox's site-packages through a .pth file: when `import sglang` resolves to a
checkout (PYTHONPATH=<tree>/python, a trial tree), the spec keeps that origin (what `find_spec` and the server's
own evidence show) while the stand-in package's code runs, its submodules included.
"""

from __future__ import annotations

# Duck-typed loader and finder (no importlib.abc): this runs at the start of every Python process on the twin's
# box, and importlib.abc pulls in importlib.resources, pathlib, typing… (~30 ms of a ~100 ms start).
import importlib.machinery
import os
import sys

_SITE = os.path.dirname(os.path.abspath(__file__))
_ENGINES = ("sglang", "vllm")  # whichever stand-in this box installed


class _StandinLoader:
    def __init__(self, standin: str):
        self.standin = standin

    def create_module(self, spec):  # default module creation
        return None

    def exec_module(self, module) -> None:
        init = os.path.join(self.standin, "__init__.py")
        module.__path__ = [self.standin]  # submodules come from the stand-in
        with open(init, encoding="utf-8") as fh:
            exec(compile(fh.read(), init, "exec"), module.__dict__)


class _CheckoutFinder:
    def find_spec(self, name, path=None, target=None):
        standin = os.path.join(_SITE, name)
        if name not in _ENGINES or not os.path.isdir(standin):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, sys.path)
        locs = list(spec.submodule_search_locations or []) if spec is not None else []
        if spec is None or not locs or os.path.realpath(locs[0]) == os.path.realpath(standin):
            return None
        spec.loader = _StandinLoader(standin)
        return spec


if not any(isinstance(f, _CheckoutFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _CheckoutFinder())
