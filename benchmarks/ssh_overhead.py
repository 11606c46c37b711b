"""Per-command overhead of SSHHost vs raw paramiko vs OpenSSH+ControlMaster, on one private loopback sshd.

Run: `.venv/bin/python benchmarks/ssh_overhead.py [--calls 200] [--json]` (as root it logs in as `sdtest`).
Goals (issue #2): SSHHost median <= 1.5x raw paramiko, and below OpenSSH with ControlMaster.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import paramiko
from pydantic import BaseModel

from specdoctor.testing import SSHServer, start_sshd

__all__ = ["Timing", "BenchResult", "bench", "main"]


class Timing(BaseModel):
    """Seconds per call for one way of running `true`."""

    name: str
    median_s: float
    p90_s: float
    calls: int


class BenchResult(BaseModel):
    """The three timings and the ratios the goals are stated in."""

    sshhost: Timing
    paramiko: Timing
    openssh_controlmaster: Timing
    ratio_vs_paramiko: float
    ratio_vs_openssh_cm: float
    meets_goals: bool


def _time_interleaved(ways: dict[str, Callable[[], None]], calls: int, warmup: int = 10) -> list[Timing]:
    """Round-robin the ways call by call, so load from other processes hits all of them alike."""
    for fn in ways.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(calls):
        for name, fn in ways.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    out = []
    for name, xs in samples.items():
        xs.sort()
        out.append(Timing(name=name, median_s=statistics.median(xs), p90_s=xs[int(0.9 * (len(xs) - 1))],
                          calls=calls))
    return out


def _raw_paramiko(server: SSHServer) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.load_host_keys(str(server.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(server.host, port=server.port, username=server.user, key_filename=str(server.key_path),
                   allow_agent=False, look_for_keys=False)
    transport = client.get_transport()
    assert transport is not None and isinstance(transport.sock, socket.socket)
    transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as a careful user would
    return client


def bench(server: SSHServer, calls: int = 200) -> BenchResult:
    """Median seconds per `true` for each way, all against the same sshd, calls interleaved."""
    host = server.connect()
    client = _raw_paramiko(server)
    control = Path(tempfile.mkdtemp(prefix="sd-cm-")) / "cm.sock"
    cm = ["-o", "ControlMaster=auto", "-o", f"ControlPath={control}", "-o", "ControlPersist=60"]
    argv = server.ssh_argv(*cm)

    def ours() -> None:
        host.run(["true"])

    def raw() -> None:
        _, out, err = client.exec_command("true")
        out.read()
        err.read()
        out.channel.recv_exit_status()

    def openssh() -> None:
        subprocess.run([*argv, "true"], check=True, stdin=subprocess.DEVNULL)

    try:
        openssh()  # opens the master connection
        t_ours, t_raw, t_cm = _time_interleaved(
            {"SSHHost.run": ours, "paramiko exec_command": raw, "ssh ControlMaster": openssh}, calls)
    finally:
        subprocess.run([*server.ssh_argv(*cm, "-O", "exit")], capture_output=True, stdin=subprocess.DEVNULL)
        client.close()
        host.close()
    r_base = t_ours.median_s / t_raw.median_s
    r_cm = t_ours.median_s / t_cm.median_s
    return BenchResult(sshhost=t_ours, paramiko=t_raw, openssh_controlmaster=t_cm, ratio_vs_paramiko=r_base,
                       ratio_vs_openssh_cm=r_cm, meets_goals=r_base <= 1.5 and r_cm < 1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    opts = parser.parse_args(argv)
    with start_sshd() as server:
        result = bench(server, opts.calls)
    if opts.json:
        print(result.model_dump_json(indent=2))
    else:
        for t in (result.sshhost, result.paramiko, result.openssh_controlmaster):
            print(f"{t.name:24s} median {t.median_s * 1e3:7.2f} ms   p90 {t.p90_s * 1e3:7.2f} ms   ({t.calls} calls)")
        print(f"SSHHost / paramiko          = {result.ratio_vs_paramiko:.2f}x  (goal <= 1.5x)")
        print(f"SSHHost / OpenSSH+ControlMaster = {result.ratio_vs_openssh_cm:.2f}x  (goal < 1.0x)")
        print("goals met" if result.meets_goals else "goals NOT met")
    return 0 if result.meets_goals else 1


if __name__ == "__main__":
    sys.exit(main())
