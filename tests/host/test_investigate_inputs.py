"""`investigate` refuses bad inputs before anything runs, and its exit code says how the run ended."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from specdoctor.commands.investigate import RUN_EXIT_CODES, exit_for
from specdoctor.commands.preflight import parse_expect, parse_params
from specdoctor.engine.runner import RunOutcome
from specdoctor.errors import UsageError

LAUNCH = "python -m sglang.launch_server --model-path /models/m --tp 2"


def _cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "SPECDOCTOR_HOME": str(tmp_path / "sdhome")}
    return subprocess.run([sys.executable, "-m", "specdoctor", "investigate", "--out", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=120, env=env)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def _repo_mid_rebase(tmp_path: Path) -> Path:
    repo = tmp_path / "sglang"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "f.py").write_text("a = 1\n")
    _git(repo, "add", "f.py")
    _git(repo, "commit", "-qm", "one")
    _git(repo, "checkout", "-qb", "other")
    (repo / "f.py").write_text("a = 2\n")
    _git(repo, "commit", "-qam", "two")
    _git(repo, "checkout", "-q", "main")
    (repo / "f.py").write_text("a = 3\n")
    _git(repo, "commit", "-qam", "three")
    rebase = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "rebase", "other"],
                            capture_output=True, text=True)
    assert rebase.returncode != 0 and (repo / ".git" / "rebase-merge").is_dir()  # stopped on the conflict
    return repo


def _nothing_started(tmp_path: Path) -> bool:
    """No run record and no audit entry: the playbook never began (so no server was launched)."""
    return not (tmp_path / "sdhome" / "runs").exists() and not (tmp_path / "out" / "audit.jsonl").exists()


def test_repo_mid_rebase_is_refused_before_the_playbook(tmp_path: Path) -> None:
    repo = _repo_mid_rebase(tmp_path)
    before = (repo / "f.py").read_bytes()
    proc = _cli(["--host", "local", "--repo", str(repo), "--launch", LAUNCH, "--yes"], tmp_path)
    assert proc.returncode == 20, proc.stderr
    assert proc.stderr.strip() == (f"specdoctor: error [repo-refused]: {repo}: a rebase is in progress; finish or "
                                   "abort it before running specdoctor")
    assert _nothing_started(tmp_path) and (repo / "f.py").read_bytes() == before
    assert (repo / ".git" / "rebase-merge").is_dir()  # the user's rebase is left as it was


def test_repo_that_does_not_exist_exits_20_as_the_readme_says(tmp_path: Path) -> None:
    proc = _cli(["--host", "local", "--yes", "--repo", "/no/such/checkout"], tmp_path)
    assert proc.returncode == 20, proc.stderr
    assert proc.stderr.strip() == ("specdoctor: error [repo-refused]: --repo /no/such/checkout is not a git "
                                   "checkout on local")
    assert _nothing_started(tmp_path)


@pytest.mark.parametrize(("args", "says"), [
    (["--launch", "python -m sglang.launch_server --tp 2"], "no --model-path"),
    (["--launch", "python -m sglang.launch_server --model-path m --tp two"], "--launch: --tp-size: not a number"),
    (["--launch", 'python -m sglang.launch_server --model-path "m'], "cannot parse the launch line"),
    (["--python", "/no/such/python3"], "--python /no/such/python3 does not run on local"),
])
def test_bad_repo_launch_or_python_refused_before_the_playbook(tmp_path: Path, args: list[str], says: str) -> None:
    proc = _cli(["--host", "local", "--yes", *args], tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specdoctor: error [usage]: ") and says in lines[0], proc.stderr
    assert _nothing_started(tmp_path)


@pytest.mark.parametrize("text", ["baseline=nan", "spec=inf", "baseline=-inf", "baseline=-3", "spec=0",
                                  "baseline=0.0", "baseline=89,baseline=90", "fast=3", "baseline"])
def test_expect_rejects_non_finite_negative_zero_and_malformed(text: str) -> None:
    with pytest.raises(UsageError):
        parse_expect(text)


def test_expect_accepts_the_documented_form() -> None:  # the case where the checks must NOT fire
    assert parse_expect("baseline=89,spec=94.5") == {"baseline": 89.0, "spec": 94.5}
    assert parse_expect(None) == {}


@pytest.mark.parametrize("item", ["novalue", "=3", " x=1", "a b=1", "1x=2"])
def test_param_rejects_malformed_pairs(item: str) -> None:
    with pytest.raises(UsageError):
        parse_params([item])
    with pytest.raises(UsageError):
        parse_params(["repeats=3", "repeats=4"])


def test_param_reads_json_values() -> None:
    assert parse_params(["repeats=3", "grid=[1,2]", "name=x=y", "empty="]) == {
        "repeats": 3, "grid": [1, 2], "name": "x=y", "empty": ""}


def test_ipv6_spec_with_a_missing_bracket_is_one_line(tmp_path: Path) -> None:
    proc = _cli(["--host", "root@[fe80::1:22"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("specdoctor: error [usage]: unbalanced brackets in 'root@[fe80::1:22': write an "
                                   "IPv6 host as user@[v6addr]:port")


@pytest.mark.parametrize(("status", "code"), [("finished", 0), ("error", 3), ("needs-restore", 21)])
def test_exit_code_follows_how_the_run_ended(status: str, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = RunOutcome(run_id="r1", out_dir="/tmp/r1", verdict="inconclusive", status=status)
    assert RUN_EXIT_CODES[status] == code
    if code == 0:
        exit_for(outcome)
        assert capsys.readouterr().err == ""
        return
    with pytest.raises(typer.Exit) as info:
        exit_for(outcome)
    assert info.value.exit_code == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run r1" in err and "/tmp/r1" in err


def test_a_run_that_ends_in_error_exits_3_with_its_report(tmp_path: Path) -> None:
    """End to end: a playbook step fails under `on_error: abort`; the report is written, the exit code is 3."""
    pb = tmp_path / "abort.yaml"
    pb.write_text("name: t\nsteps:\n  - {id: f, tool: catalog_diffs, args: {repo: /no/such/checkout}, "
                  "on_error: abort}\n  - {id: c, action: conclude}\n")
    # --engine: no server runs here, and the run's engine would otherwise come from whatever other tests serve
    proc = _cli(["--host", "local", "--engine", "sglang", "--playbook", str(pb), "--json"], tmp_path)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("specdoctor: run ") and "ended in error" in proc.stderr
    assert (tmp_path / "out" / "report.json").is_file()
    ok = tmp_path / "ok.yaml"  # the same run without the failing step: exit 0 (the check must not fire)
    ok.write_text("name: t\nsteps:\n  - {id: h, tool: host_facts}\n  - {id: c, action: conclude}\n")
    assert _cli(["--host", "local", "--engine", "sglang", "--playbook", str(ok), "--json"], tmp_path).returncode == 0
