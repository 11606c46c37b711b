"""`--good-ref` on the twin: the reference named by the user (a tag) finds the same commit the fingerprint's would,
and a range of innocent commits given by date names none.

The culprit story runs the whole CLI once (in-process) with a good fingerprint whose `commit` was removed, so only
`--good-ref` can give the range: without it there is nothing to bisect and no commit could be named.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from specdoctor.cli import main
from specdoctor.host import open_host
from specdoctor.toolkit import ToolContext, registry

CULPRIT = "[Spec] report per-verify accept histogram in metrics (#13021)"


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout.strip()


def test_a_tag_given_with_good_ref_names_the_culprit_commit(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))
    host = open_host("sim:upstream-one-culprit")
    close = host.close
    monkeypatch.setattr(host, "close", lambda: None)  # the CLI closes what it opened; the test looks after it
    monkeypatch.setattr("specdoctor.host.open_host", lambda *a, **k: host)
    try:
        repo, fp_path = host.hints.repo, Path(host.hints.good_fingerprint)
        good = json.loads(fp_path.read_text())
        _git(repo, "tag", "fast-again", good["commit"])  # the user's own name for the good run's commit
        fp = {k: v for k, v in good.items() if k != "commit"}  # the fingerprint no longer says which commit
        (no_commit := fp_path.with_name("good-run-no-commit.json")).write_text(json.dumps(fp))
        head = _git(repo, "rev-parse", "HEAD")
        with pytest.raises(SystemExit) as exited:
            main(["investigate", "--host", "sim:upstream-one-culprit", "--yes", "--json", "--good-ref", "fast-again",
                  "--good-fingerprint", str(no_commit), "--out", str(tmp_path / "out")])
        assert exited.value.code == 0, capsys.readouterr().err[-2000:]
        report = json.loads((tmp_path / "out" / "report.json").read_text())
        assert report["verdict"] == "code-regression"
        causes = [c for c in report["attribution"]["causes"] if c.get("confirmed", True)]
        assert [c["name"].split("'")[1] for c in causes] == [CULPRIT]
        assert causes[0]["phase_effect"]["phase"] == "verify" and causes[0]["ci_high"] < 0
        # the culprit and its parent were profiled on their own probes' servers: no launch only to profile (#46)
        audit = (tmp_path / "out" / "audit.jsonl").read_text().splitlines()
        assert not [line for line in audit if "setsid" in line and "phases-" in line]
        md = (tmp_path / "out" / "report.md").read_text()
        assert f"reference commit: {good['commit'][:10]} (from --good-ref fast-again)" in md
        assert _git(repo, "rev-parse", "HEAD") == head
    finally:
        close()


def test_innocent_commits_since_a_date_name_no_commit(free_gpus) -> None:
    with open_host("sim:upstream-innocent") as host:
        free_gpus(host)
        repo = host.hints.repo
        ctx = ToolContext(host=host, run_id="good-ref-innocent", auto_approve=True)
        res = registry.call(ctx, "bisect_commits", {
            "repo": repo, "launch": host.hints.launch, "python": host.hints.python,
            "essential": ["python/sglang/srt/models/kimi_k25.py"], "good_ref": "2026-01-12 10:00",
            "trial_port": 41785, "phases": False})
        assert res.ok, res.summary
        assert res.output["verdict"] == "no-change" and res.output["culprits"] == [] and res.output["commits"] == 10, \
            res.summary
