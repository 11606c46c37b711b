"""Hostile strings in every string argument of every built-in tool: no shell interpretation, argv intact, no crash."""

from __future__ import annotations

from specdoctor.host import LocalHost
from specdoctor.testing import SSHServer

from .hostile import CANARY, run_campaign, run_local_campaign, ssh_budget, ssh_probe_factory, string_fields


def _report(camp) -> str:
    bad = camp.escapes + camp.altered + camp.crashes
    return "\n".join(f"{c.tool}.{c.field}: {c.outcome} {c.mismatches[:2]} {c.detail[:200]}" for c in bad[:20])


def test_every_tool_with_string_arguments_is_in_the_campaign():
    tools = {t for t, _f, _k in string_fields()}
    assert {"launch_server", "apply_patches", "backup_worktree", "restore_worktree", "triage_diffs",
            "scan_feature_gates", "benchmark", "check_env_propagation"} <= tools
    assert len(string_fields()) >= 40


def test_over_1000_hostile_cases_through_localhost_never_reach_a_shell():
    camp = run_local_campaign(scale=1.0, workers=2)
    assert len(camp.cases) >= 1000
    assert camp.tools_covered() == {t for t, _f, _k in string_fields()}
    assert not camp.escapes and not camp.crashes, _report(camp)
    # the campaign reached real work, not only validation errors
    outcomes = camp.by_outcome()
    assert outcomes["ok"] >= 100 and camp.commands >= 2000, outcomes
    assert not CANARY.exists()


def test_hostile_cases_over_ssh_arrive_byte_identical(sshd: SSHServer):
    camp = run_campaign(ssh_probe_factory(sshd), ssh_budget)
    assert len(camp.cases) >= 80
    assert not camp.escapes and not camp.altered and not camp.crashes, _report(camp)
    assert camp.by_outcome()["ok"] >= 5 and camp.commands >= 200


def test_the_canary_would_catch_a_shell():
    """The detector itself: the same payloads do create the canary when a shell interprets them."""
    from .hostile import PAYLOADS

    host = LocalHost()
    host.run(f"echo {PAYLOADS[1]}", check="ignore")
    try:
        assert CANARY.exists()
    finally:
        CANARY.unlink(missing_ok=True)


def test_the_dumper_would_catch_an_altered_argv(sshd: SSHServer):
    from .hostile import workspace

    with workspace() as ws:
        host = ssh_probe_factory(sshd)(ws)
        try:
            host.run(["echo", "a b"], env={"SD_X": "1 2"})
            assert host.mismatches() == []
            host.run(["echo", "a b"], env={"SD_X": "1 2"})
            tag = next(iter(host.rec.sent))
            host.rec.sent[tag] = (["echo", "a", "b"], {"SD_X": "1"})  # what a naive join-and-split would deliver
            assert len(host.mismatches()) == 2
        finally:
            host.close()


def test_localhost_read_of_a_hostile_path_is_a_one_line_error():
    import pytest

    from specdoctor.errors import UsageError

    for path in ["a" * 5000, "/", "/nonexistent/\n$(id)"]:
        with pytest.raises(UsageError):
            LocalHost().read(path)
