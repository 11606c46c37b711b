"""Plan and cost, read-only: what a launch costs on this box (from the running server's own log) and the run's plan."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, Field

from specdoctor.host.base import Host, Raw
from specdoctor.parsers.sglang_startup import StartupTimings, parse_startup
from specdoctor.toolkit import ToolContext, tool

__all__ = ["LaunchCostInput", "LaunchCost", "launch_cost", "PlannedPhase", "PlanInput", "Plan", "plan_launches",
           "process_started_at", "make_plan"]

_LOG_HEAD = 4 * 1024 * 1024  # the start-up lines are at the top of a log; the rest is request traffic
_LOG_TAIL = 256 * 1024  # recent 'Decode batch' lines give the decode rate the benchmark will see
_STOP_S = 10.0  # SIGTERM -> group gone; the trial primitive waits for it (a few seconds on a real box)


class LaunchCostInput(BaseModel):
    """Arguments of launch_cost."""

    pid: int = Field(gt=0, description="The running server's main process.")
    log_path: str | None = Field(default=None, description="Its log file (find_server_processes' log_path).")


class LaunchCost(BaseModel):
    """How long one launch of this server takes on this box, measured from its own start-up."""

    pid: int
    started_at: datetime | None = Field(default=None, description="Process start (/proc/PID/stat + btime), UTC.")
    ready_at: datetime | None = Field(default=None, description="The log's ready line, UTC.")
    launch_s: float | None = Field(default=None, description="Start to ready: what one relaunch costs here.")
    load_weight_s: float | None = None
    cuda_graph_s: float | None = None
    decode_tok_s: float | None = Field(default=None, description="Median 'gen throughput' of recent Decode lines.")
    source: str = Field(description="How launch_s was obtained (or why it was not).")
    evidence: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        if self.launch_s is None:
            return f"launch time unknown: {self.source}"
        parts = [f"load {self.load_weight_s:.0f} s" if self.load_weight_s is not None else "",
                 f"CUDA graphs {self.cuda_graph_s:.0f} s" if self.cuda_graph_s is not None else ""]
        detail = ", ".join(p for p in parts if p)
        return f"one launch ≈ {self.launch_s:.0f} s on this box ({self.source}{'; ' + detail if detail else ''})"


# One round-trip: boot time, clock ticks, the process's stat line, the host's UTC offset.
def _clock_script(pid: int) -> Raw:
    return Raw(f"grep '^btime ' /proc/stat; getconf CLK_TCK; cat /proc/{int(pid)}/stat; date +%z")


def process_started_at(host: Host, pid: int) -> tuple[datetime | None, timedelta | None, list[str]]:
    """(start time in UTC, the host's UTC offset, evidence): starttime is field 22 of /proc/PID/stat in clock
    ticks after boot; the comm field may hold spaces and parentheses, so fields are counted after its last ')'."""
    res = host.run(_clock_script(pid), check="ignore")
    lines = res.stdout.splitlines()
    offset: timedelta | None = None
    if lines and len(lines[-1]) == 5 and lines[-1][0] in "+-" and lines[-1][1:].isdigit():
        z = lines[-1]
        offset = timedelta(hours=int(z[1:3]), minutes=int(z[3:])) * (1 if z[0] == "+" else -1)
    btime = next((int(ln.split()[1]) for ln in lines if ln.startswith("btime ") and ln.split()[1].isdigit()), None)
    tick = next((int(ln) for ln in lines[1:3] if ln.strip().isdigit()), None)
    stat = next((ln for ln in lines if ln.startswith(f"{pid} (")), None)
    if btime is None or not tick or stat is None:
        return None, offset, [f"/proc/{pid}/stat unreadable"]
    fields = stat[stat.rindex(")") + 2:].split()
    start_ticks = int(fields[19])  # field 22 overall; fields[0] is field 3 (state)
    started = datetime.fromtimestamp(btime + start_ticks / tick, tz=UTC)
    return started, offset, [f"/proc/{pid}/stat starttime {start_ticks} ticks after boot {btime} (CLK_TCK {tick})"]


def _read_log(host: Host, path: str) -> tuple[str, str]:
    head = host.run(["head", "-c", str(_LOG_HEAD), path], check="ignore")
    tail = host.run(["tail", "-c", str(_LOG_TAIL), path], check="ignore")
    return (head.stdout if head.ok else ""), (tail.stdout if tail.ok else "")


def _to_utc(at: datetime | None, offset: timedelta | None) -> datetime | None:
    if at is None or offset is None:
        return None
    return (at - offset).replace(tzinfo=UTC)


@tool(effect="read")
def launch_cost(ctx: ToolContext, args: LaunchCostInput) -> LaunchCost:
    """What one launch of the running server costs on this box: process start (/proc/PID/stat) to the log's
    ready line, with weight loading and CUDA-graph capture as the log reports them. Reads only."""
    started, offset, evidence = process_started_at(ctx.host, args.pid)
    timings = StartupTimings()
    decode: float | None = None
    if args.log_path:
        head, tail = _read_log(ctx.host, args.log_path)
        timings = parse_startup(head)
        gens = [ln.gen_throughput for ln in ctx.engine.decode_lines(tail) if ln.gen_throughput]
        decode = statistics.median(gens) if gens else None
        evidence += timings.lines[:8]
    ready = _to_utc(timings.ready_at, offset)
    out = LaunchCost(pid=args.pid, started_at=started, ready_at=ready, load_weight_s=timings.load_weight_s,
                     cuda_graph_s=timings.cuda_graph_s, decode_tok_s=decode, source="", evidence=evidence)
    # The parts the log times itself are a floor: a launch cannot be shorter than loading plus capture.
    floor = (timings.load_weight_s or 0.0) + (timings.cuda_graph_s or 0.0)
    if started and ready and ready >= started - timedelta(seconds=1):
        out.launch_s = max((ready - started).total_seconds(), floor)
        out.source = "process start to the log's ready line"
    elif timings.first_at and timings.ready_at:
        out.launch_s = max((timings.ready_at - timings.first_at).total_seconds(), floor)
        out.source = "first start-up log line to the ready line (process start not comparable)"
    elif floor:
        out.launch_s = floor
        out.source = "weight loading + CUDA-graph capture as logged (no ready line found)"
    else:
        out.source = ("no start-up lines in the log" if args.log_path else
                      "the server's log is not a file (tty or pipe): nothing to time its start-up from")
    return out


class PlannedPhase(BaseModel):
    """One step of the plan that launches servers: how many at most, and what it can decide."""

    step: str
    launches: int = Field(ge=0, description="At most this many launches (the step's own cap).")
    expected: float | None = Field(default=None, ge=0, description="The launches expected from what is known "
                                   "before the stop (None: the cap).")
    runs: int = Field(default=0, ge=0, description="Benchmark runs per launch (warm-up included).")
    condition: str = Field(default="", description="When it runs at all ('' = always).")
    decides: str = Field(default="", description="What the launches can decide (why each is worth its cost).")


class PlanInput(BaseModel):
    """Arguments of plan_launches."""

    pid: int = Field(gt=0, description="The running server's main process.")
    port: int = Field(ge=1, le=65535, description="The port it serves on.")
    log_path: str | None = None
    phases: list[PlannedPhase] = Field(default_factory=list)
    requests_per_run: int = Field(default=3, ge=1)
    max_new_tokens: int = Field(default=128, ge=1)
    stops_user_server: bool = Field(default=True, description="The launches need the GPUs the user's server holds.")


class Plan(BaseModel):
    """What the run will launch and what it costs on this box, printed before the first disruptive step."""

    port: int
    phases: list[PlannedPhase]
    launches_max: int
    launches_expected: float = Field(default=0.0, description="Expected from what is known before the stop.")
    launch_s: float | None = Field(default=None, description="One launch here, measured from the running server.")
    run_s: float | None = Field(default=None, description="One benchmark run here (requests x tokens / decode rate).")
    box_minutes_max: float | None = Field(default=None, description="Upper estimate: every phase at its cap.")
    box_minutes_expected: float | None = Field(default=None, description="The expected launches' box time.")
    stops_user_server: bool = True
    cost: LaunchCost

    @property
    def text(self) -> str:
        if self.launches_max == 0:
            return f"no launch: your server on :{self.port} keeps running"
        def _n(n: float) -> str:
            return f"{n:.0f} launch{'es' if round(n) != 1 else ''}"
        exp = (f" ≈ {self.box_minutes_expected:.0f} box minutes" if self.box_minutes_expected is not None else "")
        worst = (f" ≈ {self.box_minutes_max:.0f}" if self.box_minutes_max is not None else "")
        unknown = "" if self.box_minutes_max is not None else \
            " (box time unknown: no start-up time could be measured)"
        where = (f"your server on :{self.port} will be down meanwhile" if self.stops_user_server else
                 f"each launch runs beside your server on :{self.port} (its GPUs must have room)")
        return (f"expected {_n(self.launches_expected)}{exp} (worst case {self.launches_max}{worst}){unknown}; "
                f"{where}")

    def summary_line(self) -> str:
        return self.text


def make_plan(cost: LaunchCost, args: PlanInput) -> Plan:
    """The plan from a measured launch cost: launches x (launch + runs + stop), every phase at its cap."""
    run_s = (args.requests_per_run * args.max_new_tokens / cost.decode_tok_s) if cost.decode_tok_s else None
    total = sum(p.launches for p in args.phases)
    expected = sum(p.launches if p.expected is None else p.expected for p in args.phases)
    box: float | None = None
    box_exp: float | None = None
    if cost.launch_s is not None:
        launch_s = cost.launch_s

        def minutes(n: Callable[[PlannedPhase], float]) -> float:
            seconds = sum((n(p) * (launch_s + _STOP_S + p.runs * (run_s or 0.0)) for p in args.phases), 0.0)
            return math.ceil(seconds / 6) / 10  # one decimal, rounded up
        box = minutes(lambda p: p.launches)
        box_exp = minutes(lambda p: p.launches if p.expected is None else p.expected)
    return Plan(port=args.port, phases=args.phases, launches_max=total, launches_expected=round(expected, 1),
                launch_s=cost.launch_s, run_s=run_s, box_minutes_max=box, box_minutes_expected=box_exp,
                stops_user_server=args.stops_user_server, cost=cost)


@tool(effect="read")
def plan_launches(ctx: ToolContext, args: PlanInput) -> Plan:
    """The run's plan before anything is stopped: which configurations will be launched, at most how many
    launches, and the box time they cost here (from the running server's own start-up). Reads only."""
    cost = launch_cost(ctx, LaunchCostInput(pid=args.pid, log_path=args.log_path))
    return make_plan(cost, args)
