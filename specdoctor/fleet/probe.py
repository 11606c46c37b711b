"""Survey one host, read-only: fingerprint, launch flags, a short benchmark of the running server, accept length.

Every failure of one host (unreachable, refused key, no server, a tool error) becomes that host's row; only a
bug in specdoctor itself escapes.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from collections.abc import Callable
from typing import Any

from specdoctor.errors import (
    ConnectionLost,
    HostAuthFailed,
    HostError,
    HostKeyRejected,
    HostUnreachable,
    SpecdoctorError,
)
from specdoctor.fleet.models import HostStatus, HostSurvey, SurveyParams, SurveyTarget
from specdoctor.host import open_host
from specdoctor.host.base import Host
from specdoctor.inference import engine_for_launch
from specdoctor.models import Evidence, Fingerprint
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.environment.fingerprint import Fingerprint as ToolFingerprint
from specdoctor.tools.serving.measure import BenchmarkResult
from specdoctor.tools.serving.server import ServerInfoOutput, ServerList

__all__ = ["survey_host", "status_of", "launch_flags", "controller_id"]

_STATUS: list[tuple[type[HostError], HostStatus]] = [
    (HostUnreachable, "unreachable"), (HostAuthFailed, "auth-failed"), (HostKeyRejected, "host-key-rejected"),
    (ConnectionLost, "connection-lost")]


def controller_id() -> str:
    """Which controller process did the work (rows surveyed by another controller keep theirs on resume)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def status_of(exc: SpecdoctorError) -> HostStatus:
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return "error"


def launch_flags(args: dict[str, Any], home: str) -> dict[str, str]:
    """Launch flags as text, the host's home folder written as `~` (alike hosts may differ only in it)."""
    out: dict[str, str] = {}
    for k, v in args.items():
        text = v if isinstance(v, str) else str(v)
        if home and home != "/" and (text == home or text.startswith(home.rstrip("/") + "/")):
            text = "~" + text[len(home.rstrip("/")):]
        out[k] = text
    return out


def _open(target: SurveyTarget, params: SurveyParams) -> Host:
    return open_host(target.spec, known_hosts=params.known_hosts, identity_files=params.identity_files or None,
                     ssh_config=params.ssh_config, accept_new_host_key=params.accept_new_host_key)


def _examine(host: Host, row: HostSurvey, target: SurveyTarget, params: SurveyParams,
             say: Callable[[str], None]) -> None:
    ctx = ToolContext(host=host, run_id="survey", progress=say)
    found = registry.call(ctx, "find_server_processes", {"port": target.port})
    servers = registry.typed_output(found, ServerList, where="find_server_processes")
    port = target.port
    several = None
    if servers is not None and servers.servers:
        if port is None and len(servers.servers) > 1:
            ports = ", ".join(str(s.port) for s in servers.servers)
            several = f"several SGLang servers (ports {ports}): name one as port= in the hosts file"
        server = next((s for s in servers.servers if port is None or s.port == port), servers.servers[0])
        port = port or server.port
        # The surveyed server says which engine it is: a box may also run another engine's server, and then the
        # host's processes alone cannot tell (the benchmark asked them, and failed as "several engines").
        ctx.run_engine = ctx.run_engine or engine_for_launch(server.argv)
        row.launch = launch_flags(server.args, host.home())
        row.launch_line = " ".join(server.argv)
    row.port = port
    fp_res = registry.call(ctx, "fingerprint", {"port": port})
    fp = registry.typed_output(fp_res, ToolFingerprint, where="fingerprint")
    row.fingerprint = Fingerprint.model_validate(fp.model_dump()) if fp is not None else None
    if several:
        row.error = several
        return
    if servers is None or not servers.servers:
        row.status, row.error = "no-server", found.error or found.summary or "no SGLang server running"
        return
    info = registry.typed_output(registry.call(ctx, "server_info", {"port": port}), ServerInfoOutput,
                                 where="server_info")
    row.server_accept_length = info.accept_length if info else None
    bench_res = registry.call(ctx, "benchmark", {"port": port, "runs": params.runs, "label": "benchmark",
                                                 "requests_per_run": params.requests_per_run,
                                                 "max_new_tokens": params.max_new_tokens,
                                                 "warmup_runs": params.warmup_runs})
    bench = registry.typed_output(bench_res, BenchmarkResult, where="benchmark")
    if bench is None:
        row.status, row.error = "error", f"benchmark: {bench_res.error or bench_res.summary}"
        return
    row.throughput = bench.model_copy(update={  # the benchmark's own measurement: the row keeps its summary
        "label": target.name, "evidence": Evidence(tool="benchmark", commands=[e.command for e in bench_res.evidence])})
    row.accept_samples = [r.accept_length for r in bench.runs if r.accept_length is not None]
    row.accept_length = statistics.median(row.accept_samples) if row.accept_samples else None
    row.status = "ok"


def survey_host(target: SurveyTarget, params: SurveyParams, say: Callable[[str], None] | None = None) -> HostSurvey:
    """One host's row. Read-only tools only; any host-side failure is recorded in the row, never raised."""
    t0 = time.monotonic()
    row = HostSurvey(name=target.name, spec=target.spec, status="error", port=target.port,
                     controller=controller_id())

    def progress(msg: str) -> None:
        if say:
            say(f"{target.name}: {msg}")

    try:
        host = _open(target, params)
        try:
            _examine(host, row, target, params, progress)
        finally:
            host.close()
    except SpecdoctorError as exc:
        row.status, row.error = (status_of(exc) if row.status != "ok" else row.status), " ".join(str(exc).split())
    row.seconds = round(time.monotonic() - t0, 3)
    row.finished_at = time.time()
    return row
