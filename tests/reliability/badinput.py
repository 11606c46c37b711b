"""Bad-input campaign: every way a user can point the CLI at the wrong thing ends in ONE line and a stable exit code.

Cases run `specdoctor.cli.main` in-process (argv, env and cwd set per case) and capture what it writes:
stderr must be exactly one `specdoctor: error [code]: ...` line, no traceback, exit code = the error's code.
tests/host/test_cli_errors.py runs five of these in a subprocess; this covers the issue's whole table.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.sim.ports import free_port as _closed_port  # below the ephemeral range: no bind race

__all__ = ["BadCase", "BadOutcome", "bad_cases", "run_cli", "run_bad_campaign", "ssh_agent"]


@dataclass
class BadCase:
    """argv for `specdoctor`, the error kind and exit code it must end with, and words the line must hold."""

    name: str
    argv: list[str]
    kind: str
    code: int
    must: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class BadOutcome:
    """What the CLI did with one bad input."""

    case: BadCase
    code: int
    stderr: str
    stdout: str

    @property
    def one_line(self) -> bool:
        lines = self.stderr.strip().splitlines()
        return (len(lines) == 1 and lines[0].startswith(f"specdoctor: error [{self.case.kind}]: ")
                and "Traceback" not in self.stderr + self.stdout and self.code == self.case.code
                and all(w in lines[0] for w in self.case.must))


@contextlib.contextmanager
def _env(extra: dict[str, str], cwd: Path) -> Iterator[None]:
    old, old_cwd = dict(os.environ), os.getcwd()
    os.environ.update(extra)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(old)
        os.chdir(old_cwd)


def run_cli(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str, str]:
    """(exit code, stderr, stdout) of `specdoctor ARGV` run in this process, as its console script would."""
    from specdoctor import cli

    err, out = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["specdoctor", *argv]
    code: Any = 0
    try:
        with _env(env or {}, cwd or Path.cwd()), contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                cli.main()
            except SystemExit as exc:
                code = exc.code
    finally:
        sys.argv = saved
    return int(code or 0), err.getvalue(), out.getvalue()


@contextlib.contextmanager
def ssh_agent(tmp: Path) -> Iterator[str]:
    """A real ssh-agent holding no keys; yields its socket path and stops it by PID."""
    sock = str(tmp / "agent.sock")
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", sock], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            proc.poll()
            if proc.returncode is not None:
                break
            import time

            time.sleep(0.02)
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=5)


def bad_cases(sshd: Any, tmp: Path, agent_sock: str) -> list[BadCase]:
    """The issue's bad inputs (hosts, keys, host keys, specs, options, files) against the loopback sshd."""
    target = f"{sshd.user}@127.0.0.1:{sshd.port}"
    kh, key = str(sshd.known_hosts), str(sshd.key_path)
    changed = tmp / "known_hosts_changed"  # the server's name with another key: a man in the middle
    changed.write_text(f"[127.0.0.1]:{sshd.port} {_server_key_type(sshd)} {_other_key_b64(tmp)}\n")
    empty = tmp / "known_hosts_empty"
    empty.write_text("")
    notjson = tmp / "notjson.json"
    notjson.write_text("<html><body>502 Bad Gateway</body></html>")
    badyaml = tmp / "bad.yaml"
    badyaml.write_text("name: [unclosed\n")
    badpb = tmp / "pb.yaml"
    badpb.write_text("name: t\nsteps:\n  - id: a\n    tool: no_such_tool\n")
    inv = ["investigate", "--out", str(tmp / "out")]
    ssh = ["--known-hosts", kh, "-i", key]
    no_agent = {"SSH_AUTH_SOCK": agent_sock}  # an empty agent (an invalid socket path leaks one in paramiko)
    return [
        BadCase("closed port", [*inv, "--host", f"{sshd.user}@127.0.0.1:{_closed_port()}", *ssh],
                "host-unreachable", 11, ["127.0.0.1"]),
        BadCase("DNS failure", [*inv, "--host", "root@no-such-host.invalid", *ssh], "host-unreachable", 11,
                ["no-such-host.invalid"]),
        BadCase("wrong key", [*inv, "--host", target, "--known-hosts", kh, "-i", str(sshd.host_key_path)],
                "host-auth", 12, ["tried", str(sshd.host_key_path)], no_agent),
        BadCase("wrong user", [*inv, "--host", f"nosuchuser@127.0.0.1:{sshd.port}", *ssh], "host-auth", 12,
                ["tried", "user nosuchuser"], no_agent),
        BadCase("agent without keys", [*inv, "--host", target, "--known-hosts", kh], "host-auth", 12,
                ["tried", "ssh-agent (0 keys)"], {"SSH_AUTH_SOCK": agent_sock, "HOME": str(tmp)}),
        BadCase("unknown host key", [*inv, "--host", target, "--known-hosts", str(empty), "-i", key],
                "host-key", 13, ["--accept-new-host-key", "SHA256:"]),
        BadCase("changed host key", [*inv, "--host", target, "--known-hosts", str(changed), "-i", key,
                                     "--accept-new-host-key"], "host-key", 13, ["CHANGED", "SHA256:"]),
        BadCase("shell in host spec", [*inv, "--host", "root@gpu;id"], "usage", 2),
        BadCase("password in ssh URL", [*inv, "--host", "ssh://root:hunter2@gpu:22"], "usage", 2),
        BadCase("port out of range", [*inv, "--host", "root@gpu:99999"], "usage", 2),
        BadCase("empty user", [*inv, "--host", "@gpu"], "usage", 2),
        BadCase("unknown scenario", [*inv, "--host", "sim:no-such-scenario"], "scenario", 30),
        BadCase("invalid scenario YAML", [*inv, "--host", f"sim:{badyaml}"], "scenario", 30),
        BadCase("bad --expect", [*inv, "--host", "local", "--expect", "baseline=fast"], "usage", 2),
        BadCase("bad --param", [*inv, "--host", "local", "--param", "novalue"], "usage", 2),
        BadCase("unknown playbook", [*inv, "--host", "local", "--playbook", "no-such-playbook"], "usage", 2),
        BadCase("playbook naming an unknown tool", [*inv, "--host", "local", "--playbook", str(badpb)], "usage", 2),
        BadCase("resume of an unknown run", ["resume", "no-such-run"], "usage", 2),
        BadCase("report of an HTML error page", ["report", "show", str(notjson)], "usage", 2),
        BadCase("negative break-even input", ["breakeven", "--baseline-tps", "-3"], "usage", 2),
    ]


_KEY_TYPE: dict[str, str] = {}


def _server_key_type(sshd: Any) -> str:
    kind = Path(str(sshd.host_key_path) + ".pub").read_text().split()[0]
    _KEY_TYPE["last"] = kind
    return kind


def _server_key_type_of(_tmp: Path) -> str:
    return _KEY_TYPE.get("last", "ssh-ed25519")


def _other_key_b64(tmp: Path) -> str:
    """A freshly generated key of the server key's type: what a man in the middle would present."""
    path = tmp / "mitm_key"
    if not path.exists():
        kind = {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa"}.get(_server_key_type_of(tmp), "ed25519")
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
    return Path(str(path) + ".pub").read_text().split()[1]


def run_bad_campaign(sshd: Any, tmp: Path, only: Callable[[BadCase], bool] | None = None) -> list[BadOutcome]:
    """Run every bad-input case through the CLI; never raises on a bad outcome."""
    out = []
    home = tmp / "sdhome"
    with ssh_agent(tmp) as sock:
        for case in bad_cases(sshd, tmp, sock):
            if only is not None and not only(case):
                continue
            env = {"SPECDOCTOR_HOME": str(home), "COLUMNS": "80", **case.env}
            code, err, stdout = run_cli(case.argv, env=env, cwd=tmp)
            out.append(BadOutcome(case, code, err, stdout))
    return out
