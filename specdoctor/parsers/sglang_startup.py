"""SGLang start-up log lines: when weights loaded, how long CUDA graphs took, when the server was ready."""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel, Field

from specdoctor.parsers.text import strip_ansi

__all__ = ["StartupTimings", "parse_startup"]

# `[2025-01-27 02:01:28 TP0] msg` (0.4+) or `[04:40:55 TP0] msg` (0.2/0.3, time only: no date to place it).
_PREFIX = re.compile(r"^\[(?P<date>\d{4}-\d{2}-\d{2} )?(?P<time>\d{2}:\d{2}:\d{2})(?:[.,]\d+)?(?: (?P<tag>[^\]]*))?\] (?P<msg>.*)$")
_LOAD_BEGIN = re.compile(r"^Load weight begin\b")
_LOAD_END = re.compile(r"^Load weight end\b(?:\. elapsed=(?P<s>[\d.]+) ?s)?(?:.*?\btype=(?P<type>[\w.]+))?")
_GRAPH_END = re.compile(r"^Capture (?:draft )?(?:cuda|piecewise cuda|cpu|npu) graph end\. Time elapsed: (?P<s>[\d.]+) ?s")
_READY = re.compile(r"The server is fired up and ready to roll!")
# engine.py (0.5.2x): "Engine startup timings (s): load_weight=12.34, kv_cache_allocation=..., ..."
_TIMINGS = re.compile(r"^Engine startup timings \(s\): (?P<body>.*)$")


class StartupTimings(BaseModel):
    """What one server's start-up log says about its launch (times are the log's own, naive local clock)."""

    first_at: datetime | None = Field(default=None, description="First timestamped line of this start-up.")
    load_begin_at: datetime | None = None
    load_end_at: datetime | None = Field(default=None, description="Last 'Load weight end' (the draft loads last).")
    models_loaded: list[str] = Field(default_factory=list, description="type= of each 'Load weight end' (rank 0).")
    cuda_graph_s: float | None = Field(default=None, description="Sum of 'Capture cuda graph end. Time elapsed' "
                                       "over target and draft (the largest rank's, ranks capture in parallel).")
    ready_at: datetime | None = Field(default=None, description="'The server is fired up and ready to roll!'")
    engine_timings: dict[str, float] = Field(default_factory=dict, description="'Engine startup timings' fields.")
    lines: list[str] = Field(default_factory=list, description="The lines these came from (evidence).")

    loads_s: list[float] = Field(default_factory=list, description="Each 'Load weight begin' -> 'end' (target, "
                                 "then draft), rank 0 or untagged; second resolution.")

    @property
    def load_weight_s(self) -> float | None:
        if "load_weight" in self.engine_timings:
            return self.engine_timings["load_weight"]
        return sum(self.loads_s) if self.loads_s else None


def parse_startup(text: str) -> StartupTimings:
    """Read the LAST start-up in `text` (a log appended to by several launches): from its last 'Load weight begin'
    sequence to the first ready line after it. Lines without a dated prefix (tqdm bars, tracebacks) are skipped."""
    out = StartupTimings()
    graph_by_tag: dict[str, list[float]] = {}
    began: datetime | None = None
    for raw in strip_ansi(text).splitlines():
        m = _PREFIX.match(raw.strip())
        if not m or not m.group("date"):
            continue
        at = datetime.strptime(m.group("date") + m.group("time"), "%Y-%m-%d %H:%M:%S")
        msg = m.group("msg")
        tag = (m.group("tag") or "").strip()
        if (out.ready_at is not None and _LOAD_BEGIN.match(msg)) or (msg.startswith("server_args=") and out.first_at):
            out, graph_by_tag, began = StartupTimings(), {}, None  # a later start-up in the same log: read that one instead
        if out.first_at is None:
            out.first_at = at
        rank0 = tag in ("", "TP0") or tag.startswith("TP0 ")
        if _LOAD_BEGIN.match(msg):
            out.load_begin_at = out.load_begin_at or at
            if rank0:
                began = at
            out.lines.append(raw.strip())
        elif lm := _LOAD_END.match(msg):
            out.load_end_at = at
            if rank0:
                if lm.group("type"):
                    out.models_loaded.append(lm.group("type"))
                if lm.group("s"):  # newer SGLang times the load itself (sub-second resolution)
                    out.loads_s.append(float(lm.group("s")))
                    began = None
                elif began is not None:
                    out.loads_s.append((at - began).total_seconds())
                    began = None
            out.lines.append(raw.strip())
        elif gm := _GRAPH_END.match(msg):
            graph_by_tag.setdefault(tag, []).append(float(gm.group("s")))
            out.cuda_graph_s = max(sum(v) for v in graph_by_tag.values())
            out.lines.append(raw.strip())
        elif tm := _TIMINGS.match(msg):
            for key, value in re.findall(r"(\w+)=([\d.]+)", tm.group("body")):
                out.engine_timings[key] = float(value)
            out.lines.append(raw.strip())
        elif _READY.search(msg) and out.ready_at is None:
            out.ready_at = at
            out.lines.append(raw.strip())
    return out
