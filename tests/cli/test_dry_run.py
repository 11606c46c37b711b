"""`investigate --dry-run` on the twin is a plan: cheap reads only, every other step listed with its commands.

One real CLI run (typer in-process) on `sim:seed`, whose host is kept open so the test can look at the box
afterwards: the same listening ports and server processes as before, no trial-server record, no git write,
no benchmark or sweep, a plan-only report with no verdict and no game plan, exit 0.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from specdoctor.cli import app
from specdoctor.engine.dry_run import CHEAP_READS, plan_step, runs_in_dry_run
from specdoctor.engine.playbook import Step
from specdoctor.engine.playbook_check import load_playbook
from specdoctor.engine.state import StateView
from specdoctor.host import open_host
from specdoctor.report.writer import load_report

_GIT_WRITES = re.compile(r"\bgit\b.*\b(update-ref|reset|clean|stash (push|store|drop|pop)|apply|checkout-index|"
                         r"commit-tree|read-tree|worktree add)\b")


def _box(host: Any) -> tuple[set[str], set[str]]:
    """(pid + argv, listening ports with their pid) of every process of this twin: those whose environment has the
    sandbox's HOME (its user's server and any server a run would launch; never another test's twin)."""
    home = host.sandbox.base_env["HOME"]
    procs = host.run(["sh", "-c", 'for p in /proc/[0-9]*; do tr "\\0" "\\n" < $p/environ 2>/dev/null | '
                                  'grep -qx "HOME=$1" && echo "${p#/proc/} $(tr "\\0" " " < $p/cmdline)"; done; true',
                      "sh", home]).stdout.splitlines()
    pids = {line.split(" ", 1)[0] for line in procs}
    listen = host.run(["ss", "-ltnpH"]).stdout.splitlines()
    ports = {f"{ln.split()[3]} {pid}" for ln in listen for pid in re.findall(r"pid=(\d+)", ln) if pid in pids}
    return {line for line in procs if "sh -c" not in line and "/proc/" not in line}, ports


@pytest.fixture(scope="module")
def dry(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("home")
    out = tmp_path_factory.mktemp("dry") / "out"
    mp = pytest.MonkeyPatch()
    mp.setenv("SPECDOCTOR_HOME", str(home))
    host = open_host("sim:seed")
    close = host.close
    mp.setattr(host, "close", lambda: None)  # the CLI closes what it opened; this test looks at the box after
    mp.setattr("specdoctor.host.open_host", lambda *a, **k: host)
    try:
        before = _box(host)
        res = CliRunner().invoke(app, ["investigate", "--host", "sim:seed", "--yes", "--dry-run", "--out", str(out)])
        after = _box(host)
        runs_dir = host.run(["sh", "-c", "ls $HOME/.specdoctor/runs/*/started.json 2>/dev/null; true"]).stdout
    finally:
        mp.undo()
        close()
    return {"res": res, "out": out, "before": before, "after": after, "started": runs_dir}


def test_exit_zero_and_nothing_launched(dry: dict[str, Any]) -> None:
    assert dry["res"].exit_code == 0, dry["res"].output
    assert dry["before"] == dry["after"]            # same processes of this twin, same listening ports
    procs, ports = dry["before"]
    assert any("sglang" in p for p in procs) and ports, "the twin's server must be up (else this proves nothing)"
    assert dry["started"].strip() == ""            # launch_server records every group it starts there


def test_no_benchmark_no_sweep_no_git_write(dry: dict[str, Any]) -> None:
    commands = [json.loads(line)["command"] for line in (dry["out"] / "audit.jsonl").read_text().splitlines()]
    assert len(commands) > 20                       # the cheap reads did run
    for c in commands:
        assert "setsid nohup" not in c and "/generate" not in c, c
        assert "all_reduce_perf" not in c and "allreduce_bench" not in c, c
        assert not _GIT_WRITES.search(c), c


def test_plan_only_report_without_verdict(dry: dict[str, Any]) -> None:
    report = load_report(dry["out"])
    assert report.verdict == "plan-only" and report.confidence is None and not report.game_plan
    assert "dry run: plan only" in report.summary
    assert report.plan is not None and report.plan.launches_max > 0      # the plan step (a read) ran
    assert report.launches_made == 0
    conclude = next(d for d in report.decisions if d.step == "conclude")
    assert conclude.status == "dry-run"
    md = (dry["out"] / "report.md").read_text()
    assert "dry run: plan only" in md and "Box left as found" not in md
    assert "verdict: plan-only" in dry["res"].output


def test_every_mutating_step_is_listed_with_its_commands(dry: dict[str, Any]) -> None:
    from specdoctor.engine.graph import step_effect

    report = load_report(dry["out"])
    planned = {p.step: p for p in report.dry_run}
    playbook = load_playbook("regression")
    mutating = [s.id for s in playbook.steps if step_effect(s) in ("mutate", "disrupt")]
    assert mutating and set(mutating) <= set(planned)
    for sid in mutating:
        assert planned[sid].commands and all(c.command for c in planned[sid].commands), sid
    launches = [c.command for c in planned["reproduce"].commands if "sglang.launch_server" in c.command]
    assert launches and all("--speculative" not in c for c in launches)   # the baseline drops speculation
    assert any(c.command.startswith("git ") and "update-ref" in c.command for c in planned["backup"].commands)
    assert any("all_reduce_perf" in c.command and not c.known for c in planned["nccl"].commands)
    printed = dry["res"].output
    for sid in mutating:
        assert f"~ {sid} (" in printed
    assert "$ setsid nohup " in printed and "sglang.launch_server" in printed


def test_cheap_reads_are_an_allowlist() -> None:
    """A new or slow read (the sweep, a benchmark) is planned, never run, in a dry run."""
    for slow in ("nccl_sweep", "benchmark", "conclude", "llm_explore", "reproduce", "some_new_tool"):
        assert not runs_in_dry_run(slow)
    assert {"host_facts", "fingerprint", "locate_server", "plan_run", "catalog_diffs", "triage_diffs",
            "scan_feature_gates", "check_env_propagation"} <= CHEAP_READS


def test_unknown_tool_is_planned_with_its_arguments() -> None:
    planned = plan_step(Step(id="probe", title="probe", tool="some_new_tool"), StateView({"params": {}}),
                        {"port": 30000, "empty": None, "deltas": {"a": 1, "b": 2}, "rows": [{"x": 1}]}, "read")
    assert planned.commands[0].command == "some_new_tool(port=30000, deltas=<2 fields>, rows=<1 items>)"
    assert not planned.commands[0].known and "takes longer than a read" in planned.why


def test_dry_run_report_md_is_short(dry: dict[str, Any]) -> None:
    md = (dry["out"] / "report.md").read_text()
    # 260: the plan now lists the `phases` step and the phase profile's cost (#31); every step stays one line
    # 262: two more steps, one line each: the upstream range since the good run's commit and its bisection (#50)
    # 264: two more steps, one line each: the plan re-estimated before the stop and after reproduce (#46)
    assert len(md.splitlines()) < 264
    assert Path(dry["out"] / "commands.md").exists()


def test_dry_run_html_fits_in_chromium(dry: dict[str, Any]) -> None:
    """The long launch lines of the plan wrap or scroll inside their box: nothing wider than the page."""
    from tests.report.browser import check_page

    html = dry["out"] / "report.html"
    assert "sglang.launch_server" in html.read_text()
    for check in check_page(html):
        assert check.overflow["nbad"] == 0, check.overflow["bad"]
        assert check.verdict_box is not None and check.verdict_box["y"] < 900


def test_planned_launch_lines_are_redacted_and_use_the_running_servers_line() -> None:
    launch = "python -m sglang.launch_server --model-path /m --api-key sk-live-0123456789abcdef --port 30000"
    view = StateView({"params": {}, "facts": {"launch": launch, "server": {"running": False}}})
    step = Step(id="reproduce", title="reproduce", action="reproduce")
    planned = plan_step(step, view, {}, "disrupt")
    lines = [c.command for c in planned.commands if "sglang.launch_server" in c.command]
    assert len(lines) == 2 and all("sk-live" not in c and "--port PORT" in c for c in lines)
    assert "--api-key" in lines[0]                                  # the flag stays, its value does not


def test_attribution_trials_are_planned_from_the_deltas_found() -> None:
    from specdoctor.models.delta import Delta, DeltaList, Revert

    deltas = DeltaList(deltas=[
        Delta(kind="env", name="NCCL_PROTO", reference=None, current="Simple", source="/etc/nccl.conf",
              revertible=True, revert=Revert(unset=["NCCL_PROTO"])),
        Delta(kind="launch-flag", name="attention_backend", reference="fa3", current="triton", source="launch line",
              revertible=True, revert=Revert(argv_set={"attention_backend": "fa3"})),
        Delta(kind="hardware", name="pcie-link", reference="16", current="8", revertible=False)])
    launch = "python -m sglang.launch_server --model-path /m --speculative-algorithm EAGLE3 --port 30000"
    view = StateView({"params": {}, "facts": {"launch": launch, "deltas": deltas.model_dump(mode="json")}})
    planned = plan_step(Step(id="attribute", title="attribute", action="attribute"), view, {}, "disrupt")
    launches = [c for c in planned.commands if "sglang.launch_server" in c.command]
    assert len(launches) == 2                                        # one per revertible delta, none for the link
    assert "env -u NCCL_PROTO" in launches[0].command and "NCCL_PROTO: unset → Simple" in launches[0].note
    assert "with --attention-backend fa3" in launches[1].note
    assert not planned.commands[-1].known                            # the search's next trials need outcomes


def test_the_dry_run_plans_the_stop_the_run_makes(dry: dict[str, Any]) -> None:
    # a real bug: the dry run read no record of the user's server and said it "need not be stopped", planning one
    # launch fewer than the run (which stopped it and counted the restart)
    report = load_report(dry["out"])
    assert report.plan is not None and report.plan.stops_user_server
    assert "will be down meanwhile" in report.plan.text and "expected " in report.plan.text
    assert any(p.step == "restart" for p in report.plan.phases)
    assert report.plan.launches_expected is not None and report.plan.launches_expected <= report.plan.launches_max
    free = next(p for p in report.dry_run if p.step == "free_gpus")
    assert "kill -TERM" in free.commands[0].command
