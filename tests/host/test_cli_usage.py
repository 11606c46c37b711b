"""CLI conventions: typer's usage errors (exit 2), --version, `python -m specdoctor`, -v/-q, help width,
the config file and SPECDOCTOR_* precedence, and run ids that `runs` prints working in `report show`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor import __version__
from specdoctor.testing import SSHServer


def _cli(args: list[str], tmp_path: Path, env: dict[str, str] | None = None,
         columns: int = 80) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": str(columns),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "SPECDOCTOR_HOME": str(tmp_path / "sdhome")}
    return subprocess.run([sys.executable, "-m", "specdoctor", *args], capture_output=True, text=True, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, timeout=120, env={**base, **(env or {})})


@pytest.mark.parametrize(("args", "says"), [
    (["investigate"], "Missing option '--host'"),
    (["investigate", "--hots", "sim:seed"], "No such option: --hots"),
    (["breakeven", "--baseline-tps", "abc"], "Invalid value for '--baseline-tps'"),
    (["report", "show"], "Missing argument"),
    (["no-such-command"], "No such command"),
])
def test_usage_errors_print_usage_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    proc = _cli(args, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("Usage: specdoctor"), proc.stderr
    assert says in proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_version_and_python_dash_m(tmp_path: Path) -> None:
    proc = _cli(["--version"], tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"specdoctor {__version__}", proc.stderr
    helped = _cli(["--help"], tmp_path)
    assert helped.returncode == 0
    for command in ("investigate", "resume", "restore", "runs", "breakeven", "mcp", "report", "config"):
        assert f"\n  {command} " in helped.stdout
    assert "--install-completion" in helped.stdout  # typer's shell completion
    # what the installed bash completion script asks: complete "specdoctor inv"
    done = _cli([], tmp_path, env={"_SPECDOCTOR_COMPLETE": "complete_bash", "COMP_WORDS": "specdoctor inv",
                                   "COMP_CWORD": "1"})
    assert done.returncode == 0 and done.stdout.split() == ["investigate"], done.stderr
    script = _cli([], tmp_path, env={"_SPECDOCTOR_COMPLETE": "source_bash"})
    assert "_specdoctor_completion" in script.stdout


def test_help_is_wrapped_not_cut_at_80_columns(tmp_path: Path) -> None:
    proc = _cli(["investigate", "--help"], tmp_path, columns=80)
    assert proc.returncode == 0
    assert "--good-fingerprint" in proc.stdout and "…" not in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    top = _cli(["--help"], tmp_path, columns=80).stdout
    assert "..." not in top.split("Commands:")[1]  # each command's first sentence whole, wrapped


@pytest.mark.parametrize("command", [["investigate"], ["restore"], ["resume"], ["mcp"], ["sweep-nccl"]])
def test_every_host_opening_command_takes_ssh_options(tmp_path: Path, command: list[str]) -> None:
    out = _cli([*command, "--help"], tmp_path, columns=200).stdout
    for opt in ("-i, --identity", "--known-hosts", "--accept-new-host-key", "-v, --verbose", "-q, --quiet"):
        assert opt in out, (command, opt)


def _write_config(tmp_path: Path, text: str) -> None:
    cfg = tmp_path / "xdg" / "specdoctor" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(text)


def test_config_file_env_and_cli_precedence(tmp_path: Path) -> None:
    _write_config(tmp_path, 'host = "file@filehost"\nrepo = "/file/repo"\nknown_hosts = "~/kh"\n'
                            'identity = ["~/.ssh/k1"]\n[llm]\nmodel = "file-model"\nbase_url = "http://127.0.0.1:9/v1"\n')
    show = lambda *a, **env: json.loads(_cli(["config", "show", *a], tmp_path, env=env).stdout)  # noqa: E731
    from_file = show()
    assert from_file["host"] == "file@filehost" and from_file["repo"] == "/file/repo"
    assert from_file["known_hosts"] == str(tmp_path / "kh") and from_file["identity"] == [str(tmp_path / ".ssh/k1")]
    assert from_file["llm"] == "file-model" and from_file["llm_base_url"] == "http://127.0.0.1:9/v1"
    env = show(SPECDOCTOR_HOST="env@envhost", SPECDOCTOR_IDENTITY="/a /b")
    assert env["host"] == "env@envhost" and env["identity"] == ["/a", "/b"] and env["repo"] == "/file/repo"
    cli = show("--host", "cli@clihost", SPECDOCTOR_HOST="env@envhost")
    assert cli["host"] == "cli@clihost"
    empty = show(XDG_CONFIG_HOME=str(tmp_path / "elsewhere"))  # no file: the options' own defaults
    assert empty["host"] is None and empty["identity"] == []


def test_config_reaches_a_real_command(tmp_path: Path) -> None:
    """investigate takes its --host from the file, then the variable, then the flag (bad specs show which)."""
    _write_config(tmp_path, 'host = "root@from;file"\n')
    for env, args, shown in [({}, [], "root@from;file"), ({"SPECDOCTOR_HOST": "root@from;env"}, [], "root@from;env"),
                             ({"SPECDOCTOR_HOST": "root@from;env"}, ["--host", "root@from;cli"], "root@from;cli")]:
        proc = _cli(["investigate", "--out", str(tmp_path / "o"), *args], tmp_path, env=env)
        assert proc.returncode == 2 and proc.stderr.startswith("specdoctor: error [usage]: "), proc.stderr
        assert shown in proc.stderr


def test_broken_config_is_one_line(tmp_path: Path) -> None:
    _write_config(tmp_path, 'hots = "typo"\n')
    proc = _cli(["config", "show"], tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "hots" in proc.stderr, proc.stderr
    _write_config(tmp_path, "host = [unclosed\n")
    proc = _cli(["runs"], tmp_path)
    assert proc.returncode == 2 and "not valid TOML" in proc.stderr


def test_verbose_and_quiet_set_the_log_level(tmp_path: Path) -> None:
    from specdoctor.commands.verbosity import level_for

    assert level_for(0, False) == 30 and level_for(1, False) == 20 and level_for(2, False) == 10
    assert level_for(3, True) == 40  # -q wins
    # -v after the subcommand and before it both parse (exit 0, not a usage error)
    assert _cli(["runs", "-v"], tmp_path).returncode == 0
    assert _cli(["-vv", "runs", "-q"], tmp_path).returncode == 0


def test_report_show_takes_the_run_id_runs_prints(tmp_path: Path) -> None:
    from specdoctor.engine.runs import RunRecord
    from specdoctor.report.model import Report
    from specdoctor.report.writer import write_report

    out = tmp_path / "run-out"
    write_report(Report(verdict="inconclusive", summary="marker summary 7f3a"), out)
    home = tmp_path / "sdhome" / "runs"
    home.mkdir(parents=True)
    for rid in ("20991231-235959-abc123", "20991231-235959-abd999"):
        rec = RunRecord(run_id=rid, host="sim:seed", reopen="sim:seed", playbook="regression", out_dir=str(out),
                        checkpoint="")
        (home / f"{rid}.json").write_text(rec.model_dump_json())
    listed = _cli(["runs"], tmp_path, columns=60).stdout
    assert "20991231-235959-abc123" in listed  # whole, even at 60 columns
    for ref in ("20991231-235959-abc123", "20991231-235959-abc", "20991231-235959-abc…"):
        proc = _cli(["report", "show", ref, "--json"], tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["summary"] == "marker summary 7f3a"
    ambiguous = _cli(["report", "show", "20991231-235959-ab"], tmp_path)
    assert ambiguous.returncode == 2 and "matches 2 runs" in ambiguous.stderr
    missing = _cli(["report", "show", "nope"], tmp_path)
    assert missing.returncode == 2 and "no run 'nope'" in missing.stderr


def test_verbose_logs_the_ssh_session_and_quiet_silences_it(sshd: SSHServer, tmp_path: Path) -> None:
    """-v: the connection; -vv: each command (redacted); -q: nothing but errors. Same command, same result."""
    args = ["restore", "--host", f"{sshd.user}@127.0.0.1:{sshd.port}", "-i", str(sshd.key_path),
            "--known-hosts", str(sshd.known_hosts), "--repo", str(tmp_path / "no-repo"), "--list"]
    info = _cli([*args, "-v"], tmp_path)
    debug = _cli(["-vv", *args], tmp_path)
    quiet = _cli([*args, "-q"], tmp_path)
    for proc in (info, debug, quiet):  # the restore itself fails the same way each time
        assert proc.returncode == 15 and proc.stderr.strip().splitlines()[-1].startswith("specdoctor: error")
    assert "connected to" in info.stderr and "$ git" not in info.stderr
    assert "connected to" in debug.stderr and f"{sshd.user}@127.0.0.1:{sshd.port}$ git" in debug.stderr
    assert quiet.stderr.strip().count("\n") == 0


def test_resume_takes_new_ssh_options_for_the_run(tmp_path: Path) -> None:
    """-i/--known-hosts given to `resume` replace the ones the run started with (the runner reopens from them)."""
    from specdoctor.engine.runs import RunRecord

    home = tmp_path / "sdhome" / "runs"
    home.mkdir(parents=True)
    rec = RunRecord(run_id="20991231-000000-aaaaaa", host="local", reopen="local", playbook="regression",
                    out_dir=str(tmp_path / "o"), checkpoint=str(tmp_path / "none.sqlite"),
                    host_options={"identity_files": ["/old/key"], "known_hosts": "/old/kh"})
    (home / f"{rec.run_id}.json").write_text(rec.model_dump_json())
    proc = _cli(["resume", "20991231-000000-aaa", "-i", "/new/key", "--known-hosts", "/new/kh"], tmp_path)
    assert proc.returncode == 2 and "no checkpoint to resume" in proc.stderr, proc.stderr  # nothing to continue
    saved = RunRecord.model_validate_json((home / f"{rec.run_id}.json").read_text())
    assert saved.host_options["identity_files"] == ["/new/key"] and saved.host_options["known_hosts"] == "/new/kh"
