"""Versions of the engine, torch and torch's NCCL as one JSON line (argv[1]: the engine's package name)."""
import importlib
import importlib.metadata as md
import json
import sys

out: dict = {}
ENGINE = sys.argv[1] if len(sys.argv) > 1 else "sglang"
for dist in (ENGINE, "torch"):
    try:
        out[dist] = md.version(dist)
    except Exception:
        pass
if ENGINE not in out:
    try:
        out[ENGINE] = getattr(importlib.import_module(ENGINE), "__version__", None)
    except Exception:
        pass
try:
    import torch
    out["torch"] = torch.__version__
    out["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
except Exception:
    pass
print(json.dumps(out))
