"""Survey scale: wall time, controller CPU/memory/threads/connections and store size for N simulated hosts,
and a projection to 256 hosts from the measured per-host cost.

    python benchmarks/survey_scale.py --sizes 4 8 16 --parallel 8

Each size lays out a fresh simulated fleet (no planted departures, no lost hosts) behind the loopback sshd and
runs `specdoctor survey` in a child process; the controller figures are that child's (the simulated servers
run on the same machine, so wall time also pays for the hosts' side). Results go to stdout as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pydantic import BaseModel

from specdoctor.sim.fleet import build_fleet, load_fleet

__all__ = ["ScalePoint", "measure", "project", "main"]

SPECDOCTOR = str(Path(sys.executable).with_name("specdoctor"))


class ScalePoint(BaseModel):
    """One survey of N hosts, as the controller process experienced it."""

    hosts: int
    parallel: int
    build_s: float
    wall_s: float
    cpu_s: float
    max_rss_mib: float
    peak_threads: int
    peak_tcp: int
    store_kib: float
    ok: int
    host_s: float = 0.0


def _sample(pid: int, peaks: dict[str, int], stop: threading.Event) -> None:
    """Peak threads and open TCP sockets of the controller (read from /proc every 50 ms)."""
    while not stop.is_set():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            threads = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("Threads:")))
            fds = os.listdir(f"/proc/{pid}/fd")
        except (OSError, StopIteration, ValueError):
            break  # the controller has exited
        socks = 0
        for fd in fds:
            try:
                socks += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
            except OSError:
                continue  # closed between the listing and the read
        peaks["threads"] = max(peaks.get("threads", 0), threads)
        peaks["tcp"] = max(peaks.get("tcp", 0), socks)
        time.sleep(0.05)


def measure(hosts: int, parallel: int, workdir: Path) -> ScalePoint:
    spec = load_fleet("alike").model_copy(update={"unreachable": [], "refuse_login": [], "planted": []})
    t0 = time.monotonic()
    with build_fleet(spec, size=hosts, planted=[], parallel=4) as fleet:
        build = time.monotonic() - t0
        store = workdir / f"survey-{hosts}.sqlite"
        env = {**os.environ, "SPECDOCTOR_HOME": str(workdir / "home")}
        t1 = time.monotonic()
        proc = subprocess.Popen([SPECDOCTOR, "survey", *fleet.cli_options(), "--parallel", str(parallel),
                                 "--checkpoint", str(store), "--json", "--out", str(workdir / f"r{hosts}")],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        peaks: dict[str, int] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(proc.pid, peaks, stop), daemon=True)
        sampler.start()
        out = proc.stdout.read() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - t1
        stop.set()
        sampler.join()
        if proc.returncode != 0:
            raise SystemExit(f"survey of {hosts} hosts failed (exit {proc.returncode})")
        rows = json.loads(out)["rows"]
        return ScalePoint(hosts=hosts, parallel=parallel, build_s=round(build, 1), wall_s=round(wall, 1),
                          cpu_s=round(usage.ru_utime + usage.ru_stime, 2),
                          max_rss_mib=round(usage.ru_maxrss / 1024, 1), peak_threads=peaks.get("threads", 0),
                          peak_tcp=peaks.get("tcp", 0), store_kib=round(store.stat().st_size / 1024, 1),
                          ok=sum(1 for r in rows if r["status"] == "ok"),
                          host_s=round(statistics.median(r["seconds"] for r in rows), 2))


def analyse_seconds(hosts: int, runs: int = 8, seed: int = 0) -> float:
    """CPU seconds of the odd-ones-out analysis alone over `hosts` synthetic alike rows (two metrics each)."""
    import random

    from specdoctor.fleet.models import HostSurvey
    from specdoctor.fleet.outliers import analyse
    from specdoctor.models import Fingerprint, Measurement

    rng = random.Random(seed)
    rows = []
    for i in range(hosts):
        xs = [70 * rng.lognormvariate(0, 0.03) for _ in range(runs)]
        rows.append(HostSurvey(name=f"h{i}", spec=f"u@h{i}", status="ok", launch={"tp_size": "2"},
                               fingerprint=Fingerprint(driver="580", worker_env={"NCCL_PROTO": "LL"}),
                               throughput=Measurement(label=f"h{i}", samples=xs, median=statistics.median(xs)),
                               accept_samples=[1.8 * rng.lognormvariate(0, 0.03) for _ in range(runs)]))
    t0 = time.process_time()
    analyse(rows)
    return time.process_time() - t0


def _slope(points: list[ScalePoint], field: str) -> tuple[float, float]:
    """Least-squares (intercept, per-host slope) of one figure over the sizes measured."""
    xs = [float(p.hosts) for p in points]
    ys = [float(getattr(p, field)) for p in points]
    if len(points) < 2:
        return 0.0, ys[0] / xs[0]
    slope, intercept = statistics.linear_regression(xs, ys)
    return intercept, slope


def project(points: list[ScalePoint], target: int = 256) -> list[str]:
    """The closing note: each figure at `target` hosts from its measured per-host slope, and what gives first."""
    p = points[-1].parallel
    lines = [f"Projection to {target} hosts (least squares over {', '.join(str(x.hosts) for x in points)} hosts, "
             f"--parallel {p}):"]
    for field, unit in (("wall_s", "s"), ("cpu_s", "CPU s"), ("max_rss_mib", "MiB"), ("store_kib", "KiB")):
        a, b = _slope(points, field)
        lines.append(f"- {field}: {a:.1f} + {b:.3f}/host -> {a + b * target:.0f} {unit}")
    threads = max(x.peak_threads for x in points)
    tcp = max(x.peak_tcp for x in points)
    host_s = statistics.median(x.host_s for x in points)
    lines.append(f"- one host takes {host_s:.1f} s of wall time at work (median row): {target} hosts at --parallel {p} "
                 f"need >= {target * host_s / p:.0f} s of wall time, at --parallel 32 >= {target * host_s / 32:.0f} s.")
    lines.append(f"- threads and sockets follow --parallel, not the fleet: peak {threads} threads and {tcp} sockets "
                 f"at --parallel {p} (per host at work: a pool thread, a paramiko transport thread, the port "
                 f"forward's threads; the SSH socket, the forward's listener and its two ends).")
    for n in (target,):
        lines.append(f"- the analysis alone over {n} synthetic hosts: {analyse_seconds(n):.1f} CPU s.")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--parallel", type=int, default=8)
    args = ap.parse_args(argv)
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096)) if os.geteuid() == 0 else None
    points = []
    with tempfile.TemporaryDirectory(prefix="survey-scale-") as tmp:
        for n in args.sizes:
            points.append(measure(n, args.parallel, Path(tmp)))
            print(points[-1].model_dump_json(), file=sys.stderr, flush=True)
    print("| hosts | parallel | fleet layout s | survey wall s | one host s (median) | controller CPU s | "
          "max RSS MiB | peak threads | peak sockets | store KiB | ok |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for x in points:
        print(f"| {x.hosts} | {x.parallel} | {x.build_s} | {x.wall_s} | {x.host_s} | {x.cpu_s} | {x.max_rss_mib} | "
              f"{x.peak_threads} | {x.peak_tcp} | {x.store_kib} | {x.ok} |")
    print()
    print("\n".join(project(points)))


if __name__ == "__main__":
    main()
