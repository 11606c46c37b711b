"""SGLang start-up log lines: when weights loaded, how long CUDA graphs took, when the server was ready."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.parsers.text import TRUNCATED, clean_lines, cut_marker, flag_clipped

__all__ = ["StartupTimings", "parse_startup"]

# `[2025-01-27 02:01:28 TP0] msg` (0.4+) or `[04:40:55 TP0] msg` (0.2/0.3, time only: no date to place it).
# Labels and wrapping loggers' prefixes before it are removed by the shared clean-up; any left are skipped here.
_PREFIX = re.compile(r"\[(?P<date>\d{4}-\d{2}-\d{2} )?(?P<time>\d{2}:\d{2}:\d{2})(?:[.,]\d+)?(?: (?P<tag>[^\]]*))?\] "
                     r"(?P<msg>.*)$")
_LOAD_BEGIN = re.compile(r"^Load weight begin\b")
_LOAD_END = re.compile(r"^Load weight end\b(?:\. elapsed=(?P<s>\S+?) ?s\b)?(?:.*?\btype=(?P<type>[\w.]+))?")
# Every wording of one event, 0.4 to 0.5.17: 'Capture cuda graph end. Time elapsed: 11.35 s', 'Capture draft cuda
# graph end. ...', 'Capture piecewise cuda graph end ...', 'Capture target prefill CUDA graph end. elapsed=44.32 s',
# 'Capture target verify / draft prefill / draft decode / draft extend CUDA graph end. elapsed=...', npu/cpu graphs.
_GRAPH_END = re.compile(r"^Capture (?P<what>[\w ]*?)\s*(?:piecewise )?(?:cuda|cpu|npu) graph end\b(?P<rest>.*)$",
                        re.I)
_ELAPSED = re.compile(r"(?:Time elapsed:|elapsed=)\s*(?P<s>[^\s,]+?)\s*s\b", re.I)
_READY = re.compile(r"The server is fired up and ready to roll!")
# engine.py (0.5.1x+): "Engine startup timings (s): load_weight=0.17, ..., cuda_graph={prefill=44.32, ...}, ..."
_TIMINGS = re.compile(r"^Engine startup timings \(s\): (?P<body>.*)$")
_TIMING = re.compile(r"(?P<group>\w+)=\{(?P<inner>[^{}]*)\}|(?P<key>\w+)=(?P<value>[^,\s{}]+)")


class StartupTimings(BaseModel):
    """What one server's start-up log says about its launch (times are the log's own, naive local clock)."""

    first_at: datetime | None = Field(default=None, description="First timestamped line of this start-up.")
    load_begin_at: datetime | None = None
    load_end_at: datetime | None = Field(default=None, description="Last 'Load weight end' (the draft loads last).")
    models_loaded: list[str] = Field(default_factory=list, description="type= of each 'Load weight end' (rank 0).")
    cuda_graph_s: float | None = Field(default=None, description="Sum of every CUDA-graph capture's elapsed time "
                                       "(target, draft, draft extend; the largest rank's, ranks capture in "
                                       "parallel); else the sum of 'Engine startup timings' cuda_graph={...}.")
    cuda_graphs: dict[str, float] = Field(default_factory=dict, description="Rank 0's capture time by graph "
                                          "('target', 'draft', 'target prefill', 'draft extend', ...).")
    ready_at: datetime | None = Field(default=None, description="'The server is fired up and ready to roll!'")
    engine_timings: dict[str, float] = Field(default_factory=dict, description="'Engine startup timings' fields; "
                                             "nested groups as 'cuda_graph.prefill'.")
    lines: list[str] = Field(default_factory=list, description="The lines these came from (evidence).")
    problems: list[str] = Field(default_factory=list, description="Lines of a known kind that could not be read.")

    loads_s: list[float] = Field(default_factory=list, description="Each 'Load weight begin' -> 'end' (target, "
                                 "then draft), rank 0 or untagged; second resolution.")

    @property
    def load_weight_s(self) -> float | None:
        if "load_weight" in self.engine_timings:
            return self.engine_timings["load_weight"]
        return sum(self.loads_s) if self.loads_s else None


def _seconds(raw: str | None, line: str, problems: list[str]) -> float | None:
    """A duration as logged; None (and a problem naming the line) when it is not a finite number."""
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        problems.append(f"unreadable number {raw!r} in: {line[:100]}")
        return None
    return value


def _graph_name(what: str) -> str:
    words = what.lower().split()
    if not words or words[0] not in ("target", "draft"):
        words.insert(0, "target")
    return " ".join(words)


def _is_rank0(tag: str) -> bool:
    ranks = [t for t in tag.split() if re.fullmatch(r"TP\d+", t)]
    return not ranks or ranks == ["TP0"]


class _Reader:
    """One pass over the log; a later start-up in the same log resets it."""

    def __init__(self) -> None:
        self.out = StartupTimings()
        self.graph_by_tag: dict[str, list[float]] = {}
        self.began: datetime | None = None

    def line(self, at: datetime, tag: str, msg: str, line: str) -> None:
        out = self.out
        rank0 = _is_rank0(tag)
        if _LOAD_BEGIN.match(msg):
            out.load_begin_at = out.load_begin_at or at
            if rank0:
                self.began = at
        elif lm := _LOAD_END.match(msg):
            self._load_end(at, rank0, lm, line)
        elif gm := _GRAPH_END.match(msg):
            em = _ELAPSED.search(gm["rest"])
            s = _seconds(em["s"] if em else None, line, out.problems)
            if s is None:
                if not em:
                    out.problems.append(f"{TRUNCATED}? graph capture without its elapsed time: {line[:100]}")
                return
            self.graph_by_tag.setdefault(tag, []).append(s)
            out.cuda_graph_s = max(sum(v) for v in self.graph_by_tag.values())
            if rank0:
                name = _graph_name(gm["what"])
                out.cuda_graphs[name] = out.cuda_graphs.get(name, 0.0) + s
        elif tm := _TIMINGS.match(msg):
            self._timings(tm["body"], line)
        elif _READY.search(msg) and out.ready_at is None:
            out.ready_at = at
        else:
            return
        out.lines.append(line)

    def _load_end(self, at: datetime, rank0: bool, lm: re.Match[str], line: str) -> None:
        out = self.out
        out.load_end_at = at
        if not rank0:
            return
        if lm["type"]:
            out.models_loaded.append(lm["type"])
        s = _seconds(lm["s"], line, out.problems)
        if s is not None:  # newer SGLang times the load itself (sub-second resolution)
            out.loads_s.append(s)
            self.began = None
        elif self.began is not None:
            out.loads_s.append((at - self.began).total_seconds())
            self.began = None

    def _timings(self, body: str, line: str) -> None:
        out = self.out
        for m in _TIMING.finditer(body):
            pairs = ([(f"{m['group']}.{k}", v) for k, v in re.findall(r"(\w+)=([^,\s{}]+)", m["inner"])]
                     if m["group"] else [(m["key"], m["value"])])
            for key, raw in pairs:
                value = _seconds(raw, line, out.problems)
                if value is not None:
                    out.engine_timings[key] = value
        graphs = [v for k, v in out.engine_timings.items() if k.startswith("cuda_graph.")]
        if out.cuda_graph_s is None and graphs:
            out.cuda_graph_s = sum(graphs)


_MARKERS = ("Load weight begin.", "Load weight end.", "The server is fired up and ready to roll!",
            "Engine startup timings (s):", "Capture cuda graph ")
_LOAD_END_CLOSES = re.compile(r"\bmem(?: usage)?=\d+(?:\.\d+)? GB\.?$")
_TIMING_ITEM = re.compile(r"\w+=(?:\d+(?:\.\d+)?|\{[^{}]*\})")


def _startup_cuts(text: str, result: Any) -> Iterator[str]:
    """Start-up lines of the kinds read here have fixed ends: a message cut before its name ('Load weight',
    'Capture cud', 'The server is fi'), a 'Load weight end' not closing with its 'mem…=N GB', or an 'Engine
    startup timings' line with an unclosed '{' or an item short of 'key=number' was cut."""
    for raw in clean_lines(text):
        m = _PREFIX.search(raw.strip())
        if not m or not m["date"]:
            continue
        msg = m["msg"].rstrip()
        if marker := cut_marker(msg, *_MARKERS):
            yield f"a log line cut inside {marker!r}: {msg[-50:]!r}"
        elif msg.startswith("Capture") and not re.search(r"\bgraph\b", msg, re.I):
            yield f"a capture line cut before its 'graph': {msg[-50:]!r}"
        elif _LOAD_END.match(msg) and not _LOAD_END_CLOSES.search(msg):
            yield f"a 'Load weight end' line cut before its closing 'mem=N GB': {msg[-50:]!r}"
        elif tm := _TIMINGS.match(msg):
            items = re.split(r",\s*(?![^{}]*\})", tm["body"].strip())
            if tm["body"].count("{") != tm["body"].count("}") or not all(
                    _TIMING_ITEM.fullmatch(i.strip()) for i in items):
                yield f"an 'Engine startup timings' line cut: {msg[-50:]!r}"
        else:
            continue
        return


@flag_clipped(_startup_cuts)
def parse_startup(text: str) -> StartupTimings:
    """Read the LAST start-up in `text` (a log appended to by several launches): from its last 'Load weight begin'
    sequence to the first ready line after it. Lines without a dated prefix (tqdm bars, tracebacks) are skipped;
    a line of a known kind with an unreadable value is skipped and named in `problems`."""
    reader = _Reader()
    for raw in clean_lines(text):
        line = raw.strip()
        m = _PREFIX.search(line)  # search: an unknown wrapper before SGLang's own prefix is skipped
        if not m or not m["date"]:
            continue
        try:
            at = datetime.strptime(m["date"] + m["time"], "%Y-%m-%d %H:%M:%S")
        except ValueError:
            reader.out.problems.append(f"unreadable time in: {line[:100]}")
            continue
        msg, tag = m["msg"], (m["tag"] or "").strip()
        out = reader.out
        if (out.ready_at is not None and _LOAD_BEGIN.match(msg)) or (msg.startswith("server_args=") and out.first_at):
            problems = out.problems
            reader = _Reader()  # a later start-up in the same log: read that one instead
            reader.out.problems = problems
        if reader.out.first_at is None:
            reader.out.first_at = at
        reader.line(at, tag, msg, line)
    return reader.out
