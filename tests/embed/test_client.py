"""The Python client: read-only by default; with mutations allowed, backed up first and restored on close."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from specdoctor.embed import Client, connect
from specdoctor.host import LocalHost
from specdoctor.toolkit import ApprovalRequest, registry

from .conftest import SEED_FILES, child_env, tree_state


def test_read_tool_on_the_seed_returns_the_eight_files(seed: Client) -> None:
    assert seed.hints.repo, "sim:seed must tell where its checkout is"
    res = seed.call("catalog_diffs", repo=seed.hints.repo)
    assert res.status == "ok", res.summary
    files = [f for f in (res.output or {})["files"] if not f.get("untracked")]
    assert len(files) == SEED_FILES
    assert any(e.command.startswith("git ") and " diff " in e.command and e.exit == 0 for e in res.evidence)
    assert {s.name for s in seed.tools()} == {s.name for s in registry.all(["read"])}


def test_mutating_tool_is_refused_without_allow_mutations(repo: Path) -> None:
    before = tree_state(repo)
    with connect("local") as client:
        mark = client.host.audit.mark()
        res = client.call("stash_all", repo=str(repo))
        assert res.status == "needs_approval" and "allow_mutations" in res.summary
        assert client.host.audit.since(mark) == [] and client.backups == {}
        assert {s.effect for s in client.tools()} == {"read"}
    assert tree_state(repo) == before


def test_first_mutation_is_backed_up_and_close_restores_the_tree(repo: Path) -> None:
    before = tree_state(repo)
    client = connect("local", allow_mutations=True)
    res = client.call("stash_all", {"repo": str(repo)})
    assert res.status == "ok", res.summary
    assert list(client.backups) == [str(repo)]
    assert tree_state(repo) != before, "stash_all should have cleaned the tree"
    assert client.call("stash_all", repo=str(repo)).status == "ok"  # second mutation: no second backup
    assert len(client.backups) == 1
    done = client.close()
    assert tree_state(repo) == before
    restore = [r for r in done if r.tool == "restore_worktree"]
    assert [(r.repo, r.status) for r in restore] == [(str(repo), "ok")]
    assert client.close() == done  # idempotent


def test_invalid_arguments_run_nothing_and_make_no_backup(repo: Path) -> None:
    with Client(LocalHost(), allow_mutations=True) as client:
        mark = client.host.audit.mark()
        res = client.call("stash_all", repo=["not", "a", "path"])
        assert res.status == "error" and "repo" in (res.error or "")
        assert client.host.audit.since(mark) == [] and client.backups == {}
        bad_json = client.call_json("catalog_diffs", "{not json")
        assert '"status":"error"' in bad_json and "not JSON" in bad_json


def test_a_declining_approver_stops_the_mutation(repo: Path) -> None:
    asked: list[ApprovalRequest] = []

    def no(req: ApprovalRequest) -> bool:
        asked.append(req)
        return False

    before = tree_state(repo)
    with connect("local", allow_mutations=True, approve=no) as client:
        res = client.call("stash_all", repo=str(repo))
    assert res.status == "needs_approval" and [(a.tool, a.effect) for a in asked] == [("stash_all", "mutate")]
    assert tree_state(repo) == before


def test_atexit_restores_when_the_embedder_forgets_to_close(repo: Path, home: Path) -> None:
    before = tree_state(repo)
    script = textwrap.dedent(f"""
        import specdoctor
        client = specdoctor.connect("local", allow_mutations=True)
        res = client.call("stash_all", repo={str(repo)!r})
        assert res.status == "ok", res.summary
        # no close(): the interpreter exits with the tree stashed
    """)
    proc = subprocess.run([sys.executable, "-c", script], env=child_env(home), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert tree_state(repo) == before
