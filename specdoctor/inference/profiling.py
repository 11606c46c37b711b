"""How a running server's own profiler is driven and read: one engine's answer, so `phase_times` stays engine-blind."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specdoctor.parsers.torch_trace import PhaseTrace

__all__ = ["ProfilerPlan"]


@dataclass(frozen=True)
class ProfilerPlan:
    """Where the server writes its trace, what `/start_profile` takes, which file is the trace and how to read it.

    `missing` says in one line why the server cannot be profiled as it runs (and how to enable it); the rest is then
    unused."""

    folder: str = ""
    start_body: dict[str, Any] | None = None
    make_folder: bool = False
    trace_name: re.Pattern[str] = re.compile(r"^$")
    parse: Callable[[bytes], PhaseTrace] | None = None
    rank: str | None = None  # read this rank's newest trace (the name's `rank` group); None: the last name sorted
    notes: tuple[str, ...] = ()
    missing: str | None = None
