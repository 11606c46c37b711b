"""The real upstream story (benchmarks/real_sglang/upstream_story.py) rehearsed on the twin, over a real sshd: the
same runner that will run on the GPU lays out the good run, commits the 16-commit history on the checkout, re-applies
the essential patch, starts an sshd on loopback and runs `investigate --host root@127.0.0.1:PORT` — so the device
lease is spent only on the GPU part.

The twin does not run the tree's code, so it is told what real SGLang does with the story's lines (as a scenario
tells it about its patches): the culprit commit's sync adds 4 ms to every verify, the broken commit's import stops any
server, and the speculative server needs the essential patch. Everything else — git, the sshd, the transport, the
search, the report, the checks of the box — is the real thing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.sim.sandbox import build_sandbox

ROOT = Path(__file__).resolve().parents[2]


def _story():
    sys.path.insert(0, str(ROOT / "benchmarks/real_sglang"))
    try:
        spec = importlib.util.spec_from_file_location("upstream_story", ROOT / "benchmarks/real_sglang/upstream_story.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules.setdefault("upstream_story", mod)  # its dataclasses look their module up
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(ROOT / "benchmarks/real_sglang"))


def _teach_twin(twin_json: Path, story) -> None:
    """What real SGLang does with the story's lines, in the twin's own terms (presence markers and an effect)."""
    twin = json.loads(twin_json.read_text())
    by_role = {c.role: c for c in story.HISTORY}
    culprit, broken = by_role["culprit"].edits[0], by_role["breaks"].edits[0]
    twin["patches"] += [
        {"id": "verify-sync", "file": culprit.file, "add": culprit.text, "after": None, "essential": False,
         "missing_error": None, "breaks": None},
        {"id": "strict-env", "file": broken.file, "add": broken.text, "after": None, "essential": False,
         "missing_error": None, "breaks": "ImportError: cannot import name 'get_bool_env_var_strict' from "
                                         "'sglang.srt.utils'"},
        {"id": "draft-alias", "file": story.EAGLE3, "add": story.ESSENTIAL.splitlines()[0], "after": None,
         "essential": True, "breaks": None,
         "missing_error": f"ValueError: Model architectures ['{story.ALIAS}'] are not supported for now."}]
    twin["perf"]["effects"].append({
        "id": "verify-sync", "description": "a host sync + 4 ms sleep in every verify",
        "when": {"patches": ["verify-sync"], "patches_absent": [], "env": {}, "args": {}, "versions": {},
                 "speculative": True},
        "decode_ms": 0.0, "verify_ms": 4.0, "verify_host_ms": 0.0, "draft_host_ms": 0.0, "draft_ms": 0.0,
        "scale": 1.0, "alpha_delta": 0.0, "verify_cuda_graph": None, "decode_cuda_graph": None})
    twin_json.write_text(json.dumps(twin, indent=1))


def test_history_has_sixteen_commits_one_culprit_one_broken_and_its_fix() -> None:
    story = _story()
    roles = [c.role for c in story.HISTORY]
    assert len(story.HISTORY) >= 16 and roles.count("culprit") == roles.count("breaks") == roles.count("fixes") == 1
    assert roles.index("breaks") == roles.index("culprit") + 1 and roles.index("fixes") == roles.index("breaks") + 1
    assert len({c.subject for c in story.HISTORY}) == len(story.HISTORY)


@pytest.mark.skipif(not os.path.exists("/usr/sbin/sshd"), reason="needs openssh-server (bash .ci/run installs it)")
def test_the_upstream_story_runs_over_ssh_on_the_twin(tmp_path) -> None:
    story = _story()
    sb = build_sandbox("no-regression", root=tmp_path / "box", start_server=False)
    try:
        _teach_twin(Path(sb.root) / ".sim" / "twin.json", story)
        flags = sb.launch.split(" ", 3)[3]
        (prof := tmp_path / "prof").mkdir()
        env = {**os.environ, **sb.base_env, "STORIES_REPO": sb.repo, "STORIES_PY": sb.python,
               "STORIES_FLAGS": flags, "STORIES_PORT": str(sb.port), "STORIES_WORK": str(tmp_path / "work"),
               "STORIES_STATE": str(tmp_path / "state"), "STORY_TIMEOUT_S": "420", "STORIES_BASE_REF": "",
               "STORIES_ENGINE": "sglang",
               "STORIES_DRAFT_ALIAS": "0", "STORIES_SSH_ENV": json.dumps(sb.base_env),
               "STORIES_ENV": json.dumps({"SGLANG_TORCH_PROFILER_DIR": str(prof)}),
               "STORIES_SPECDOCTOR": str(Path(sys.executable).parent / "specdoctor")}
        env.pop("PYTHONPATH", None)
        res = subprocess.run([sys.executable, str(ROOT / "benchmarks/real_sglang/stories.py"), str(tmp_path / "out"),
                              "upstream"], env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        (row,) = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert row["over_ssh"] and row["audit_commands"] > 0, row
        assert row["verdict"] == "code-regression" and row["commit_named"], row
        assert row["innocent_commits_blamed"] == [] and row["broken_commit_skipped"], row
        assert row["phase_named"] == ["verify"], row
        assert row["box_left_as_found"] is True, row
        assert (tmp_path / "out" / "upstream" / "trace.json.gz").stat().st_size > 0  # the phase profiles kept
        # the checkout is back at its base for the stories after this one
        head = subprocess.run(["git", "-C", sb.repo, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
        assert head.strip() == row["base"]
    finally:
        sb.stop_all()
