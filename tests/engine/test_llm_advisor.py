"""The optional LLM advisor against a scripted OpenAI-compatible server on loopback (never the internet)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from embed.openai_stub import OpenAIStub, Reply, ToolCall

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.sim import open_sim_host


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-123456")


def test_narrative_is_structured_marked_llm_made_and_never_changes_the_verdict(tmp_path):
    narrative = {"summary": "The OEA gate is off in all workers; nothing here explains a slowdown.", "caveats": []}
    script = [Reply(content="Nothing else to look at."), Reply(content=json.dumps(narrative))]
    with OpenAIStub(script) as llm, open_sim_host("seed") as host:
        out = investigate(InvestigateOptions(host="sim:seed", playbook="gate-audit", out=str(tmp_path / "o"),
                                             llm="stub-model", llm_base_url=llm.base_url), host=host)
        body = llm.requests[1]
    report = json.loads(Path(out.files["json"]).read_text())
    assert body["response_format"]["type"] == "json_schema"
    llm_findings = [f for f in report["findings"] if f["llm_made"]]
    assert llm_findings and llm_findings[0]["detail"] == narrative["summary"]
    assert report["meta"]["advisor"] == "stub-model"
    assert report["verdict"] == "inconclusive"  # the rules decide; gate-audit measures nothing
    assert "sk-test-not-a-real-key" not in Path(out.files["md"]).read_text()


def test_explore_mode_runs_read_only_tools_and_refuses_mutations(tmp_path):
    with open_sim_host("seed") as host:
        repo = host.hints.repo
        before = host.run(["git", "-C", repo, "status", "--porcelain"]).stdout
        script = [
            Reply.calls(ToolCall(name="catalog_diffs", arguments={"repo": repo})),
            Reply.calls(ToolCall(name="stash_all", arguments={"repo": repo})),
            lambda body: Reply(content="catalog has " + str("python/sglang" in json.dumps(body["messages"]))),
            Reply(content=json.dumps({"summary": "explored", "caveats": []})),
        ]
        with OpenAIStub(script) as llm:
            out = investigate(InvestigateOptions(host="sim:seed", playbook="gate-audit", out=str(tmp_path / "o"),
                                                 llm="stub-model", llm_base_url=llm.base_url), host=host)
            tools_offered = {t["function"]["name"] for t in llm.requests[0]["tools"]}
        after = host.run(["git", "-C", repo, "status", "--porcelain"]).stdout
    assert "catalog_diffs" in tools_offered and "stash_all" not in tools_offered
    assert before == after and before  # the mutation the model asked for never ran
    report = json.loads(Path(out.files["json"]).read_text())
    explored = [d for d in report["decisions"] if d["step"] == "explore"]
    assert [d["tool"] for d in explored][:2] == ["catalog_diffs", "stash_all"]
    assert all(d["llm_made"] for d in explored)
    assert "not a read-only tool" in explored[1]["found"]
    assert explored[2]["found"] == "catalog has True"


def test_an_unreachable_or_broken_llm_costs_the_narrative_not_the_run(tmp_path):
    with OpenAIStub([]) as llm, open_sim_host("seed") as host:  # every request gets a 400
        out = investigate(InvestigateOptions(host="sim:seed", playbook="gate-audit", out=str(tmp_path / "o"),
                                             llm="stub-model", llm_base_url=llm.base_url), host=host)
    report = json.loads(Path(out.files["json"]).read_text())
    assert out.status == "finished" and report["meta"]["status"] == "complete"
    assert any(d["status"] == "error" and "LLM" in d["found"] for d in report["decisions"])
