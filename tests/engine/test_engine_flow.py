"""The engine on its own: `when` skips, approvals via interrupt, dry-run, abort → inconclusive report, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from specdoctor.engine.runner import InvestigateOptions, investigate, resume
from specdoctor.errors import ToolFailed, UsageError
from specdoctor.toolkit import ToolContext, registry


class _In(BaseModel):
    """Args."""

    path: str = ""
    text: str = ""


class _Out(BaseModel):
    """Out."""

    written: str = ""

    def summary_line(self) -> str:
        return f"wrote {self.written}"


def _t_write(ctx: ToolContext, args: _In) -> _Out:
    """Test tool: write a file on the host (a mutation)."""
    ctx.host.put(args.text.encode(), args.path)
    return _Out(written=args.path)


def _t_fail(ctx: ToolContext, args: _In) -> _Out:
    """Test tool: always fails."""
    raise ToolFailed("boom on purpose")


def _t_crash_once(ctx: ToolContext, args: _In) -> _Out:
    """Test tool: dies the first time (simulating a controller crash), works after."""
    marker = Path(args.path)
    if not marker.exists():
        marker.write_text("crashed")
        raise RuntimeError("controller crashed mid-step")
    return _Out(written="second time")


_TEST_TOOLS = ((_t_write, "mutate"), (_t_fail, "read"), (_t_crash_once, "read"))


@pytest.fixture(autouse=True)
def _test_tools(tmp_path, monkeypatch):
    """Temporary tools in the global registry, removed afterwards (other tests list every tool)."""
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))
    for fn, eff in _TEST_TOOLS:
        registry.register(fn, effect=eff, name=fn.__name__.lstrip("_"))
    yield
    for fn, _ in _TEST_TOOLS:
        registry.unregister(fn.__name__.lstrip("_"))


def _playbook(tmp_path: Path, steps: str) -> str:
    p = tmp_path / "pb.yaml"
    p.write_text("name: t\nsteps:\n" + steps)
    return str(p)


def _report(outcome) -> dict:
    return json.loads(Path(outcome.files["json"]).read_text())


def test_mutating_step_waits_for_approval_and_declined_means_untouched(tmp_path):
    target = tmp_path / "f.txt"
    pb = _playbook(tmp_path, f"  - {{id: w, tool: t_write, args: {{path: '{target}', text: hi}}}}\n"
                              "  - {id: c, action: conclude}\n")
    asked = []
    out = investigate(InvestigateOptions(host="local", engine="sglang", playbook=pb, out=str(tmp_path / "o1")),
                      approver=lambda payload: asked.append(payload) or False)
    assert asked and asked[0]["step"] == "w" and asked[0]["effect"] == "mutate"
    assert not target.exists()
    rep = _report(out)
    assert any(d["step"] == "w" and d["status"] == "declined" for d in rep["decisions"])

    out2 = investigate(InvestigateOptions(host="local", engine="sglang", playbook=pb, out=str(tmp_path / "o2")),
                       approver=lambda payload: True)
    assert target.read_text() == "hi"
    assert any(d["step"] == "w" and d["status"] == "ok" for d in _report(out2)["decisions"])


@pytest.mark.parametrize("yes", [False, True])
def test_dry_run_changes_nothing_and_says_what_it_would_do(tmp_path, yes):
    target = tmp_path / "g.txt"
    pb = _playbook(tmp_path, f"  - {{id: w, tool: t_write, args: {{path: '{target}', text: hi}}, approval: never}}\n")
    out = investigate(InvestigateOptions(host="local", engine="sglang", playbook=pb, dry_run=True, yes=yes, out=str(tmp_path / "o")))
    assert not target.exists()
    d = [d for d in _report(out)["decisions"] if d["step"] == "w"][0]
    assert d["status"] == "dry-run" and str(target) in d["found"]


def test_when_predicate_false_is_logged_as_a_skip(tmp_path):
    pb = _playbook(tmp_path, "  - {id: b, tool: breakeven_missing_tool_is_not_needed, when: has_backup}\n")
    with pytest.raises(Exception, match="unknown tool"):
        investigate(InvestigateOptions(host="local", engine="sglang", playbook=pb, out=str(tmp_path / "o")))
    pb2 = _playbook(tmp_path, "  - {id: f, tool: t_fail, when: has_backup}\n  - {id: c, action: conclude}\n")
    rep = _report(investigate(InvestigateOptions(host="local", engine="sglang", playbook=pb2, out=str(tmp_path / "o2"))))
    skip = [d for d in rep["decisions"] if d["step"] == "f"][0]
    assert skip["status"] == "skipped" and "backup" in skip["found"]


def test_abort_policy_still_writes_an_inconclusive_report(tmp_path):
    pb = _playbook(tmp_path, "  - {id: f, tool: t_fail, on_error: abort}\n  - {id: c, action: conclude}\n")
    out = investigate(InvestigateOptions(host="local", engine="sglang", playbook=pb, out=str(tmp_path / "o")))
    rep = _report(out)
    assert rep["verdict"] == "inconclusive" and rep["meta"]["status"] == "error"
    assert "boom on purpose" in (rep["meta"]["error"] or "")
    assert (Path(out.out_dir) / "report.md").is_file() and (Path(out.out_dir) / "audit.jsonl").exists()


def test_crash_mid_run_then_resume_finishes(tmp_path):
    marker = tmp_path / "crash-marker"
    pb = _playbook(tmp_path, "  - {id: a, tool: host_facts}\n"
                             f"  - {{id: b, tool: t_crash_once, args: {{path: '{marker}'}}}}\n"
                             "  - {id: c, action: conclude}\n")
    first = investigate(InvestigateOptions(host="local", engine="sglang", playbook=pb, out=str(tmp_path / "o")))
    assert first.status == "error" and marker.exists()
    again = resume(first.run_id)
    assert again.status == "finished"
    with pytest.raises(UsageError, match="already finished"):
        resume(first.run_id)
    rep = _report(again)
    steps = [d["step"] for d in rep["decisions"]]
    assert "a" in steps and "b" in steps and "c" in steps
