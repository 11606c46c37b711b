"""Triage by when code runs: a change inside code that runs once is off the per-batch path whatever its file."""

from __future__ import annotations

import pytest

from specdoctor.tools.checkout.code_timing import run_once_scope

SRC = '''import os

BLOCK = 64


class Worker:
    def __init__(self, args):
        self.args = args
        self.splits = 4

        def hook(batch):
            return batch

        self.hook = hook

    def init_memory_pool(self):
        self.pool = []

    def forward(self, batch):
        out = self.run(batch)
        return out
'''


def _hunk(line: int, text: str, old: str = "") -> tuple[str, int]:
    """A one-line change at `line` of SRC's new text (an added line, or a replaced one)."""
    body = (f"-{old}\n" if old else "") + f"+{text}\n"
    return f"@@ -{line},1 +{line},1 @@\n{body}", line


# Each engine file kind holds an __init__ or a per-batch method: the subsystem never decides, the function does.
KINDS = ["python/sglang/srt/managers/detokenizer_manager.py", "python/sglang/srt/managers/scheduler.py",
         "python/sglang/srt/speculative/eagle_worker_v2.py", "python/sglang/srt/models/llama.py",
         "python/sglang/srt/layers/attention/flashinfer_backend.py",
         "python/sglang/srt/distributed/device_communicators/pynccl.py",
         "python/sglang/srt/model_executor/model_runner.py"]


@pytest.mark.parametrize("path", KINDS)
def test_a_change_in_init_runs_once_in_every_file_kind(path):
    # the path is what the triage sees; the scope comes from the file's own text
    assert run_once_scope(SRC, [_hunk(9, "        self.splits = 16", "        self.splits = 4")]) == "Worker.__init__"
    assert run_once_scope(SRC, [_hunk(17, "        self.pool = [0] * 8")]) == "Worker.init_memory_pool"


@pytest.mark.parametrize("path", KINDS)
def test_a_change_in_a_per_batch_method_is_not_run_once(path):
    assert run_once_scope(SRC, [_hunk(20, "        out = self.run(batch) * 1")]) is None
    # one changed line per batch is enough to keep the file on the path
    assert run_once_scope(SRC, [_hunk(9, "        self.splits = 16"), _hunk(20, "        out = 1")]) is None


def test_a_closure_defined_in_init_and_module_constants_are_not_run_once():
    assert run_once_scope(SRC, [_hunk(12, "            return batch * 2", "            return batch")]) is None
    assert run_once_scope(SRC, [_hunk(3, "BLOCK = 128", "BLOCK = 64")]) is None


def _git(repo, *args):
    import subprocess

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


def test_triage_puts_a_change_in_init_off_the_per_batch_path_in_every_engine_file_kind(tmp_path):
    """Real git, LocalHost: each engine file kind with an __init__ change (off) and a copy changed in forward (on,
    or whatever the file kind says)."""
    from specdoctor.host import LocalHost
    from specdoctor.toolkit import ToolContext
    from specdoctor.tools.checkout.repo import TriageInput, triage_diffs

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    per_batch = {p.replace(".py", "_hot.py") for p in KINDS}
    for p in KINDS + sorted(per_batch):
        f = repo / p
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(SRC)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    for p in KINDS:
        f = repo / p
        f.write_text(SRC.replace("self.splits = 4", "self.splits = 16"))
    for p in per_batch:
        (repo / p).write_text(SRC.replace("out = self.run(batch)", "out = self.run(batch) * 1"))
    launch = ("python -m sglang.launch_server --model-path /nowhere --attention-backend flashinfer --tp 2 "
              "--speculative-algorithm EAGLE3 --speculative-draft-model-path /nowhere")
    ctx = ToolContext(host=LocalHost(base_env={"HOME": str(tmp_path)}), run_id="t")
    rows = {r.path: r for r in triage_diffs(ctx, TriageInput(repo=str(repo), launch=launch)).rows}
    for p in KINDS:
        assert rows[p].on_hot_path is False and "Worker.__init__" in rows[p].reason, (p, rows[p].reason)
        assert "runs once" in rows[p].reason
    for p in per_batch:
        assert "runs once" not in rows[p].reason, (p, rows[p].reason)
    assert rows["python/sglang/srt/managers/scheduler_hot.py"].on_hot_path is True
    assert rows["python/sglang/srt/speculative/eagle_worker_v2_hot.py"].on_hot_path is True
