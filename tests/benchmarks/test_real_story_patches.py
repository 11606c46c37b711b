"""The new real stories' patches (draft-stall, clear-culprit) land where the plant says, rehearsed on stand-ins with
the shapes of SGLang's files (one-line and multi-line signatures): the first statement of the method's body."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

WORKER = '''import torch


class EagleDraftWorker:
    def draft(self, model_worker_batch: ModelWorkerBatch):
        draft_input = model_worker_batch.spec_info
        return draft_input

    def draft_forward(self, forward_batch):
        return forward_batch

    def _draft_extend_for_decode(
        self, batch: ModelWorkerBatch, batch_result: GenerationBatchResult
    ):
        # Batch 2: Draft extend
        return batch


class EAGLEWorkerV2:
    def verify(self, batch: ModelWorkerBatch):
        return batch
'''
DETOK = '''import logging

logger = logging.getLogger(__name__)


class DetokenizerManager:
    """DetokenizerManager is a process that detokenizes the token ids."""

    def __init__(
        self,
        server_args: ServerArgs,
        port_args: PortArgs,
    ):
        self.init_ipc_channels(port_args)
'''
SCHED = '''class Scheduler:
    def init_model_worker(self):
        self.tp_worker = None
'''
BACKEND = '''class FlashInferAttnBackend(AttentionBackend):
    pass
'''


def _stories(monkeypatch, repo: Path):
    monkeypatch.setenv("STORIES_REPO", str(repo))
    spec = importlib.util.spec_from_file_location("stories_rehearsal", ROOT / "benchmarks/real_sglang/stories.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "stories_rehearsal", mod)  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _first_statement(path: Path, func: str) -> str:
    """The method's first source line's statements (a plant is one line: `import time as _t; torch.…; …`)."""
    tree = ast.parse(path.read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == func)
    return "; ".join(ast.unparse(b) for b in fn.body if b.lineno == fn.body[0].lineno)


@pytest.mark.parametrize("story,func,planted", [
    ("draft-stall", "draft", "torch.cuda.synchronize()"),
    ("clear-culprit", "_draft_extend_for_decode", "torch.cuda._sleep(4000000)")])
def test_the_plant_is_the_first_statement_of_its_method_and_every_file_still_parses(monkeypatch, tmp_path, story,
                                                                                     func, planted):
    repo = tmp_path / "repo"
    files = {"python/sglang/srt/speculative/eagle_worker_v2.py": WORKER,
             "python/sglang/srt/managers/detokenizer_manager.py": DETOK,
             "python/sglang/srt/managers/scheduler.py": SCHED,
             "python/sglang/srt/layers/attention/flashinfer_backend.py": BACKEND}
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    st = _stories(monkeypatch, repo)
    s = st.STORIES[story]
    for p in s.patches:
        st.apply(p)
    for name in files:
        ast.parse((repo / name).read_text())  # a patch inside a multi-line signature would not parse
    worker = repo / "python/sglang/srt/speculative/eagle_worker_v2.py"
    assert planted in _first_statement(worker, func)
    assert "synchronize" not in _first_statement(worker, "verify")  # the verify story's method is untouched
    if story == "draft-stall":
        assert "detokenizer up" in _first_statement(repo / "python/sglang/srt/managers/detokenizer_manager.py",
                                                    "__init__")
    assert s.phase in ("draft", "draft_extend") and s.truth == "code-regression"
