"""Host semantics that LocalHost and SSHHost must share: run, exit codes, env, cwd, stdin, timeouts, files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from specdoctor.errors import CommandFailed, CommandTimedOut, UsageError
from specdoctor.host import Host, Raw, Result
from specdoctor.testing import SSHServer

_HTTP_SERVER = """
import http.server, os, sys
os.chdir(sys.argv[1])
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
tmp = sys.argv[2] + ".tmp"
open(tmp, "w").write(str(srv.server_address[1]))
os.replace(tmp, sys.argv[2])
srv.serve_forever()
"""


def test_run_captures_stdout_stderr_and_exit(host: Host) -> None:
    res = host.run(Raw("echo out; echo err >&2; exit 3"), check="ignore")
    assert (res.stdout, res.stderr, res.exit, res.ok) == ("out\n", "err\n", 3, False)
    assert res.host == host.name and res.seconds > 0


def test_argv_is_not_interpreted_by_a_shell(host: Host) -> None:
    res = host.run(["echo", "$HOME", "`id`", "a;b", "*"])
    assert res.stdout == "$HOME `id` a;b *\n"


def test_check_raise_carries_the_result(host: Host) -> None:
    with pytest.raises(CommandFailed) as info:
        host.run(["sh", "-c", "echo boom >&2; exit 7"])
    assert info.value.result.exit == 7
    assert "boom" in str(info.value) and "exit 7" in str(info.value)
    assert "\n" not in str(info.value)


def test_check_warn_marks_and_ignore_does_not(host: Host) -> None:
    warned = host.run(["false"], check="warn")
    ignored = host.run(["false"], check="ignore")
    assert (warned.exit, warned.warned) == (1, True)
    assert (ignored.exit, ignored.warned) == (1, False)
    assert host.run(["true"], check="warn").warned is False


def test_missing_program_is_exit_127(host: Host) -> None:
    res = host.run(["specdoctor-no-such-program-xyz"], check="ignore")
    assert res.exit == 127


def test_env_reaches_the_program_exactly(host: Host) -> None:
    value = "a b 'c' \"d\" $HOME `x` \\ ;\n*"
    res = host.run(["printenv", "SD_VALUE"], env={"SD_VALUE": value})
    assert res.stdout == value + "\n"


def test_base_env_applies_and_env_overrides_it(host: Host) -> None:
    host.base_env = {"SD_A": "base", "SD_B": "base"}
    res = host.run(Raw('printf "%s %s" "$SD_A" "$SD_B"'), env={"SD_B": "call"})
    assert res.stdout == "base call"


@pytest.mark.parametrize("env", [{"A=B": "x"}, {"": "x"}, {"A": "x\x00y"}])
def test_invalid_env_is_refused_before_running(host: Host, env: dict[str, str]) -> None:
    mark = host.audit.mark()
    with pytest.raises(UsageError):
        host.run(["true"], env=env)
    assert host.audit.since(mark) == []


def test_cwd_is_honoured(host: Host, workdir: str) -> None:
    assert host.run(["pwd"], cwd=workdir).stdout.strip() == os.path.realpath(workdir)
    assert host.run(Raw("pwd"), cwd=workdir).stdout.strip() == os.path.realpath(workdir)


def test_missing_cwd_fails_without_running(host: Host, workdir: str) -> None:
    marker = Path(workdir) / "ran"
    res = host.run(["touch", str(marker)], cwd=f"{workdir}/does-not-exist", check="ignore")
    assert not res.ok and not marker.exists()


def test_stdin_is_delivered(host: Host) -> None:
    data = bytes(range(256)) * 40
    res = host.run(["sha256sum"], stdin=data)
    import hashlib

    assert res.stdout.split()[0] == hashlib.sha256(data).hexdigest()


def test_big_stdin_echoed_back_does_not_deadlock(host: Host) -> None:
    data = bytes(range(256)) * (8 * 4096)  # 8 MiB: several SSH windows in both directions at once
    res = host.run(["od", "-An", "-v", "-tx1", "-w32"], stdin=data[: 1 << 16])
    assert bytes.fromhex(res.stdout.replace("\n", " ")) == data[: 1 << 16]
    assert len(host.run(["cat"], stdin=data, timeout=60).stdout) == len(data)


def test_timeout_raises_promptly_and_host_stays_usable(host: Host) -> None:
    t0 = time.monotonic()
    with pytest.raises(CommandTimedOut) as info:
        host.run(["sleep", "5"], timeout=0.5)
    assert time.monotonic() - t0 < 3
    assert info.value.timeout == 0.5 and "sleep 5" in str(info.value)
    assert host.run(["echo", "still here"]).stdout == "still here\n"
    assert host.audit.entries[-2].note == "CommandTimedOut"


def test_empty_command_and_nul_are_usage_errors(host: Host) -> None:
    with pytest.raises(UsageError):
        host.run([])
    with pytest.raises(UsageError, match="NUL"):
        host.run(["echo", "a\x00b"])


def test_put_and_read_roundtrip_binary(host: Host, workdir: str) -> None:
    data = bytes(range(256)) * 4096 + b"\x00\r\n\xff"  # ~1 MiB, every byte value
    target = f"{workdir}/deep/er/blob.bin"
    host.put(data, target)
    assert host.read(target) == data
    assert Path(target).read_bytes() == data  # the "remote" is this machine: check the real file too


def test_put_from_local_path_with_mode(host: Host, workdir: str, tmp_path: Path) -> None:
    src = tmp_path / "script.sh"
    src.write_text("#!/bin/sh\necho shipped \"$@\"\n")
    target = f"{workdir}/bin/script.sh"
    host.put(src, target, mode=0o755)
    assert host.run([target, "ok"]).stdout == "shipped ok\n"
    assert Path(target).stat().st_mode & 0o777 == 0o755


def test_put_replaces_existing_file(host: Host, workdir: str) -> None:
    target = f"{workdir}/f.txt"
    host.put(b"first version, longer", target)
    host.put(b"second", target)
    assert host.read(target) == b"second"
    assert sorted(os.listdir(workdir)) == ["f.txt"]  # no temp files left behind


def test_read_missing_file_is_usage_error(host: Host, workdir: str) -> None:
    with pytest.raises(UsageError, match="missing.txt"):
        host.read(f"{workdir}/missing.txt")


def test_exists_and_home(host: Host, workdir: str) -> None:
    assert host.exists(workdir) and not host.exists(f"{workdir}/nope")
    home = host.home()
    assert home.startswith("/") and host.run(["test", "-d", home], check="ignore").ok


def test_every_command_lands_in_the_audit_log(host: Host, workdir: str) -> None:
    host.run(["echo", "one"], cwd=workdir, env={"SD_X": "1"})
    host.run(["false"], check="ignore")
    first, second = host.audit.entries[-2:]
    assert (first.command, first.cwd, first.env, first.exit, first.stdout_tail) == (
        "echo one", workdir, {"SD_X": "1"}, 0, "one\n")
    assert (second.command, second.exit) == ("false", 1)
    assert all(e.host == host.name for e in host.audit.entries)


def test_result_display_is_shell_safe(host: Host) -> None:
    res = host.run(["echo", "a b", "c'd"])
    assert isinstance(res, Result)
    assert host.run(Raw(res.display)).stdout == res.stdout


def test_forward_reaches_a_loopback_http_server_on_the_host(host: Host, sshd: SSHServer, workdir: str) -> None:
    import threading

    import httpx

    site = Path(workdir) / "site"
    site.mkdir()
    (site / "hello.txt").write_text("hello through the tunnel")
    port_file = f"{workdir}/http.port"
    host.put(_HTTP_SERVER.encode(), f"{workdir}/serve.py")
    pid = host.run(["sh", "-c", 'nohup "$0" "$@" >/dev/null 2>&1 & echo $!', sshd.python, f"{workdir}/serve.py",
                    str(site), port_file]).stdout.strip()
    try:
        deadline = time.monotonic() + 10
        while not host.exists(port_file) and time.monotonic() < deadline:
            time.sleep(0.05)
        remote_port = int(host.read(port_file))
        with host.forward(remote_port) as local_port:
            assert (local_port != remote_port) == (host.name != "local")  # SSH tunnels; local needs none
            with httpx.Client(base_url=f"http://127.0.0.1:{local_port}", timeout=10) as client:
                results: list[str] = []
                threads = [threading.Thread(target=lambda: results.append(client.get("/hello.txt").text))
                           for _ in range(4)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                assert results == ["hello through the tunnel"] * 4
                assert client.get("/nope").status_code == 404
    finally:
        host.run(["kill", pid], check="ignore")
