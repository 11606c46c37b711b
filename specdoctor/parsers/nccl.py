"""Parsers for nccl-tests output (text tables and -J JSON) and NCCL_DEBUG=INFO log lines."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.text import TRUNCATED, ParsedList, clean_lines, clean_text, flag_clipped, no_cut_check

__all__ = [
    "PlaceResult",
    "NcclTestsRow",
    "NcclTestsRun",
    "NcclLogLine",
    "NcclEnvSetting",
    "NcclDebugLog",
    "parse_nccl_tests",
    "parse_nccl_tests_json",
    "parse_all_reduce",
    "parse_nccl_debug",
    "nccl_version_from_code",
    "latency_at",
]


class PlaceResult(BaseModel):
    """One half of a row: out-of-place or in-place timing."""

    time_us: float | None = None
    algbw: float | None = Field(default=None, description="GB/s")
    busbw: float | None = Field(default=None, description="GB/s")
    wrong: float | None = Field(default=None, description="#wrong (or the old float 'error' column); None for N/A.")
    per_iter: dict[str, float] = Field(default_factory=dict, description="i_min/i_max/i_p99/i_cv% with -I 1.")


class NcclTestsRow(BaseModel):
    """One message size of a collective benchmark."""

    size: int = Field(description="Bytes.")
    count: int
    dtype: str
    redop: str
    root: int | None = None
    out_of_place: PlaceResult | None = None
    in_place: PlaceResult | None = None

    @property
    def time_us(self) -> float | None:
        """In-place time when present (SGLang's TP all-reduce is in place), else out-of-place."""
        for half in (self.in_place, self.out_of_place):
            if half is not None and half.time_us is not None:
                return half.time_us
        return None


class NcclTestsRun(BaseModel):
    """One collective's table (one `*_perf` run, or one allreduce_bench.py run)."""

    collective: str | None = Field(default=None, description="e.g. 'all_reduce'; None when the output does not say.")
    ngpus: int | None = None
    nthreads: int | None = None
    graph: int | None = Field(default=None, description="CUDA-graph launches (-G); 0 = none.")
    nccl_version: str | None = None
    rows: list[NcclTestsRow] = Field(default_factory=list)
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    source: str = "table"
    tool: str | None = Field(default=None, description="'nccl-tests' or 'allreduce_bench'.")
    problems: list[str] = Field(default_factory=list, description="What could not be read (cut, clipped), one line each.")


_COLLECTIVE = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall|sendrecv|scatter|gather|"
                         r"hypercube)_perf\b")
_BENCH = re.compile(r"\ballreduce_bench\b")
_HEADER = re.compile(r"\bsize\s+count\s+type\s+redop\b(.*)$")
_ROW = re.compile(r"(?:^|(?<=[\s:>)\]]))(\d+)\s+(\d+)\s+([A-Za-z_]\w*)\s+([A-Za-z_]\w*)((?:\s+\S+)+)\s*$")
_NTHREAD = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+).*?graph:\s*(\d+)")
_TESTS_VERSION = re.compile(r"nccl-library=(\d+)")
_INFO_VERSION = re.compile(r"NCCL (?:INFO )?(?:NCCL )?version (\d+\.\d+\.\d+\S*)")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
_TIME_COLS = ("time", "cputime")


def nccl_version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE → 'major.minor.patch' (codes ≥ 2.9 are major·10000 + minor·100 + patch)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _num(tok: str) -> float | None:
    if tok in ("N/A", "nan", "-nan", "inf"):
        return None
    try:
        return float(tok)
    except ValueError:
        return None


def _columns(header_tail: str) -> tuple[bool, list[list[str]]]:
    """From the header's tail after 'redop': whether a root column exists, and the per-half column names."""
    toks = header_tail.split()
    has_root = bool(toks) and toks[0] == "root"
    if has_root:
        toks = toks[1:]
    starts = [i for i, t in enumerate(toks) if t in _TIME_COLS]
    halves = []
    for j, s in enumerate(starts):
        end = starts[j + 1] if j + 1 < len(starts) else len(toks)
        halves.append([t for t in toks[s:end] if t != "timestamp"])
    return has_root, halves or [["time", "algbw", "busbw", "#wrong"], ["time", "algbw", "busbw", "#wrong"]]


def _half(names: list[str], vals: list[str]) -> PlaceResult:
    res = PlaceResult()
    for name, tok in zip(names, vals, strict=False):
        v = _num(tok)
        if name in _TIME_COLS:
            res.time_us = v
        elif name == "algbw":
            res.algbw = v
        elif name == "busbw":
            res.busbw = v
        elif name in ("#wrong", "error"):
            res.wrong = v
        elif name.startswith("i_") and v is not None:
            res.per_iter[name] = v
    return res


_SUMMARY = re.compile(r"^#\s*(?:Avg bus|Out of bou)")
_COLUMN = re.compile(r"^(?:root|time|cputime|algbw|busbw|#wrong|error|timestamp|i_\w+)$")
# '# nThread 1 nGpus 2 ... validation: 1 graph: 0' ends with validation (older nccl-tests) or graph (newer).
_NTHREAD_END = re.compile(r"\b(?:validation|graph): \d+\s*$")


def _header_cut(tail: str) -> str | None:
    """Why a table header was cut: a column name short of its word, or fewer than the out-of-place and in-place
    halves every nccl-tests (and allreduce_bench) table prints."""
    odd = [t for t in tail.split() if not _COLUMN.match(t)]
    if odd:
        return f"a header column {odd[-1]!r} short of its name"
    if sum(1 for t in tail.split() if t in _TIME_COLS) < 2:
        return "a header without its in-place half"
    return None


_Layout = tuple[bool, list[list[str]]]  # whether a root column exists, and each half's column names


@dataclass
class _Tables:
    """The scan of nccl-tests text: the runs so far, the table being read and its layout, and what the lines
    before the next table header said about it (`pending`)."""

    runs: ParsedList[NcclTestsRun] = field(default_factory=ParsedList)
    current: NcclTestsRun | None = None
    layout: _Layout | None = None
    pending: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        self.current, self.layout = None, None


def _read_preamble(t: _Tables, line: str) -> None:
    """The '# nThread', collective, and NCCL version lines that describe the next table."""
    if m := _NTHREAD.search(line):
        t.pending.update(nthreads=int(m.group(1)), ngpus=int(m.group(2)), graph=int(m.group(3)))
        t.close()
    elif re.match(r"^#\s*nThread \d", line.strip()) and not _NTHREAD_END.search(line):
        t.pending["problems"] = [f"{TRUNCATED}: a '# nThread' line without its closing 'graph: N': "
                                 f"{line.strip()[-50:]!r}"]
        t.runs.problems.extend(t.pending["problems"])
    if m := _COLLECTIVE.search(line):
        t.pending["collective"], t.pending["tool"] = m.group(1), "nccl-tests"
        t.close()
    elif _BENCH.search(line) and "#" in line:
        t.pending["collective"], t.pending["tool"] = "all_reduce", "allreduce_bench"
    if m := _TESTS_VERSION.search(line):
        t.pending["nccl_version"] = nccl_version_from_code(int(m.group(1)))
    elif m := _INFO_VERSION.search(line):
        t.pending["nccl_version"] = m.group(1)
        if t.current is not None and t.current.nccl_version is None:
            t.current.nccl_version = m.group(1)


def _read_header(t: _Tables, line: str) -> bool:
    """A table header opens a run (a cut one is flagged; one cut before 'type redop' closes the table);
    whether the line was a header."""
    if m := _HEADER.search(line):
        t.layout = _columns(m.group(1))
        t.current = NcclTestsRun(**{**t.pending, "problems": list(t.pending.get("problems", []))})
        t.runs.append(t.current)
        if why := _header_cut(m.group(1)):
            _cut(t.runs, t.current, why)
        return True
    if re.match(r"^#\s+size\s+count\b", line.strip()):
        t.runs.problems.append(f"{TRUNCATED}: a table header cut before its 'type redop' columns")
        t.close()
        return True
    return False


def _read_table_line(runs: ParsedList[NcclTestsRun], current: NcclTestsRun, layout: _Layout, line: str) -> None:
    """A line inside a table: its summary (avg bus bandwidth, out-of-bounds count) or one of its rows."""
    if m := _AVG.search(line):
        current.avg_busbw = _num(m.group(1))
        return
    if m := _OOB.search(line):
        current.out_of_bounds = int(m.group(1))
        return
    if line.lstrip().startswith("#"):
        if _SUMMARY.match(line.strip()):
            _cut(runs, current, f"a summary line short of its number: {line.strip()[-60:]!r}")
        return
    if m := _ROW.search(line):
        current.rows.append(_table_row(runs, current, layout, m))


def _table_row(runs: ParsedList[NcclTestsRun], current: NcclTestsRun, layout: _Layout,
               m: re.Match[str]) -> NcclTestsRow:
    """One row: size, count, type, redop, the root (when the header has it) and the two halves; a row with more
    or fewer values than its header names was cut."""
    has_root, halves = layout
    rest = m.group(5).split()
    want = int(has_root) + sum(len(h) for h in halves)
    if len(rest) != want or rest[-1].endswith("."):
        _cut(runs, current, f"a row of size {m.group(1)} with {len(rest)} of the header's {want} values")
    root = None
    if has_root and rest:
        root = int(rest[0]) if re.fullmatch(r"-?\d+", rest[0]) else None
        rest = rest[1:]
    parts = []
    for names in halves:
        parts.append(_half(names, rest[: len(names)]))
        rest = rest[len(names):]
    return NcclTestsRow(size=int(m.group(1)), count=int(m.group(2)), dtype=m.group(3),
                        redop=m.group(4), root=root, out_of_place=parts[0] if parts else None,
                        in_place=parts[1] if len(parts) > 1 else None)


@flag_clipped(no_cut_check)  # rows are checked against their own header's columns, in the body
def parse_nccl_tests(text: str) -> list[NcclTestsRun]:
    """Every collective table in a text (prefixes like '0: ' or '[1,0]<stdout>:' and elided rows tolerated).
    A row with fewer or more values than its header names, or a summary line short of its number, was cut:
    the run's `problems` and the list's say 'truncated'."""
    t = _Tables()
    for line in clean_lines(text):
        _read_preamble(t, line)
        if _read_header(t, line) or t.current is None or t.layout is None:
            continue
        _read_table_line(t.runs, t.current, t.layout, line)
    return t.runs


def _cut(runs: ParsedList[NcclTestsRun], run: NcclTestsRun, reason: str) -> None:
    """Note a cut once per run (the first row that shows it), on the run and on the list."""
    if not any(p.startswith(TRUNCATED) for p in run.problems):
        run.problems.append(f"{TRUNCATED}: {reason}")
        runs.problems.append(f"{TRUNCATED}: {run.collective or 'a table'}: {reason}")


def _json_half(obj: object) -> PlaceResult | None:
    if not isinstance(obj, dict):
        return None

    def f(key: str) -> float | None:
        v = obj.get(key)
        return float(v) if isinstance(v, int | float) else None

    raw_per = obj.get("per_iter")
    per = raw_per if isinstance(raw_per, dict) else {}
    return PlaceResult(time_us=f("time") if "time" in obj else f("cpu_time"), algbw=f("alg_bw"), busbw=f("bus_bw"),
                       wrong=f("nwrong"), per_iter={k: float(v) for k, v in per.items() if isinstance(v, int | float)})


def parse_nccl_tests_json(text: str) -> NcclTestsRun:
    """nccl-tests `-J` JSON (format version 2) or allreduce_bench.py --json (same keys)."""
    try:
        doc = json.loads(clean_text(text))
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"not nccl-tests JSON: {str(exc).splitlines()[0][:120]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ParseError("not nccl-tests JSON: no 'results' list")
    try:
        return _json_run(doc)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ParseError(f"nccl-tests JSON with a malformed value: {exc}") from None


def _json_run(doc: dict) -> NcclTestsRun:
    raw_cfg = doc.get("config")
    cfg = {k: v for k, v in (raw_cfg if isinstance(raw_cfg, dict) else {}).items() if isinstance(v, int)}
    args = doc.get("args") if isinstance(doc.get("args"), list) else []
    collective = doc.get("collective") if isinstance(doc.get("collective"), str) else None
    if collective is None and args:
        m = _COLLECTIVE.search(str(args[0]))
        collective = m.group(1) if m else None
    ver = doc.get("nccl_version")
    version = nccl_version_from_code(ver) if isinstance(ver, int) else (ver if isinstance(ver, str) else None)
    run = NcclTestsRun(collective=collective, ngpus=cfg.get("ngpus"), nthreads=cfg.get("nthreads"),
                       graph=cfg.get("graph"), nccl_version=version, source="json",
                       tool=str(doc.get("tool", "nccl-tests")))
    for r in doc["results"]:
        if not isinstance(r, dict) or "size" not in r:
            continue
        root = str(r.get("root", "")).strip()
        run.rows.append(NcclTestsRow(size=int(r["size"]), count=int(r.get("count", 0)), dtype=str(r.get("type", "")),
                                     redop=str(r.get("redop", "")), root=int(root) if re.fullmatch(r"-?\d+", root) else None,
                                     out_of_place=_json_half(r.get("out_of_place")), in_place=_json_half(r.get("in_place"))))
    avg = doc.get("average_bus_bandwidth")
    if isinstance(avg, dict) and isinstance(avg.get("bandwidth"), int | float):
        run.avg_busbw = float(avg["bandwidth"])
    oob = doc.get("out_of_bounds")
    if isinstance(oob, dict) and isinstance(oob.get("count"), int):
        run.out_of_bounds = oob["count"]
    return run


@flag_clipped(no_cut_check)  # the run it returns carries parse_nccl_tests's own cut checks
def parse_all_reduce(text: str) -> NcclTestsRun:
    """The all-reduce table in a text or JSON output (the first one named all_reduce, else the only unnamed one);
    ParseError when there is none."""
    if clean_text(text).lstrip().startswith("{"):
        return parse_nccl_tests_json(text)
    runs = [r for r in parse_nccl_tests(text) if r.rows]
    named = [r for r in runs if r.collective == "all_reduce"]
    if named:
        return named[0]
    unnamed = [r for r in runs if r.collective is None and all(row.redop != "none" for row in r.rows)]
    if unnamed:
        return unnamed[0]
    raise ParseError("no all_reduce table found in the output")


def latency_at(run: NcclTestsRun, size: int) -> float | None:
    """Latency (µs) at `size` bytes: the row's time when measured, else log-log interpolation between neighbours."""
    pts = sorted((r.size, r.time_us) for r in run.rows if r.time_us is not None and r.size > 0)
    for s, t in pts:
        if s == size:
            return t
    for (s0, t0), (s1, t1) in zip(pts, pts[1:], strict=False):
        if s0 < size < s1 and t0 and t1 and t0 > 0 and t1 > 0:
            w = (math.log(size) - math.log(s0)) / (math.log(s1) - math.log(s0))
            return math.exp(math.log(t0) + w * (math.log(t1) - math.log(t0)))
    return None


class NcclLogLine(BaseModel):
    """One `host:pid:tid [dev] NCCL LEVEL message` line."""

    host: str
    pid: int
    tid: int
    device: int
    level: str
    message: str


class NcclEnvSetting(BaseModel):
    """'NCCL_X set by environment to Y': proof that a process saw the variable."""

    name: str
    value: str
    pid: int
    host: str


class NcclDebugLog(BaseModel):
    """What NCCL_DEBUG=INFO output says: version, variables applied (per process), warnings."""

    version: str | None = None
    cuda_driver: int | None = None
    lines: list[NcclLogLine] = Field(default_factory=list)
    env: list[NcclEnvSetting] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list, description="What could not be read (cut, clipped), one line each.")

    def env_by_pid(self, name: str) -> dict[int, str]:
        """pid → value for one variable (the last setting each process logged)."""
        return {e.pid: e.value for e in self.env if e.name == name}


# The host part is whatever the user's hostname (or a pasted placeholder like '<cluster_name>') is: any run of
# characters up to the ':pid:tid [dev]' tail, but not a rank label's brackets or a Ray actor's parentheses.
_LOG = re.compile(r"(?P<host>[^\s:\[\]()]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:\S+:\d+ )?"
                  r"NCCL (?P<level>INFO|WARN|TRACE|ABORT) (?P<msg>.*?)\s*$")
# NCCL's rank 0 also prints a bare 'NCCL version 2.21.5+cuda12.4' line (no host:pid:tid prefix) in some setups.
_BARE_VERSION = re.compile(r"(?:^|[\s:>\]])NCCL version (?P<v>\d+\.\d+\.\d+\S*)\s*$")
_ENV_SET = re.compile(r"^(NCCL_\w+) set by environment to (.*)$")
_DRIVER = re.compile(r"^cudaDriverVersion (\d+)")


_LOG_HEAD = re.compile(r"(?P<host>[^\s:\[\]()]+):(?P<pid>\d+):(?P<tid>\d+)(?: \[(?:\d+(?:\] ?(?:\S+:\d+ )?(?P<rest>.*))?)?)?$")
_VERSION_FORM = re.compile(r"\d+\.\d+\.\d+(?:\+cuda\d+\.\d+)?")


def _debug_cuts(text: str, log: NcclDebugLog) -> Iterator[str]:
    """NCCL_DEBUG lines: 'host:pid:tid [dev] NCCL LEVEL message'. A line with that head cut before 'NCCL INFO',
    a version short of its 'major.minor.patch[+cudaX.Y]', a driver code short of its digits, or (when this log's
    NCCL ends its 'set by environment to' lines with a period) one such line without it, was cut."""
    for raw in clean_lines(text):
        h = _LOG_HEAD.search(raw.strip())
        if h and not _LOG.search(raw) and "NCCL INFO".startswith((h["rest"] or "NCCL")[:9]):
            yield f"a NCCL line cut before its message: {raw.strip()[-60:]!r}"
            return
    for line in log.lines:
        msg = line.message
        word = msg.split(" ", 1)[0]
        if any(full.startswith(msg) and full != msg for full in ("NCCL version 0", "cudaDriverVersion 0")) or (
                word.startswith("NCCL_") and msg != word and f"{word} set by environment to ".startswith(msg)):
            yield f"a NCCL line cut inside the message it is read for: {msg[-60:]!r}"
        v = re.match(r"^NCCL version (\S+)", line.message)
        if v and not _VERSION_FORM.fullmatch(v.group(1)):
            yield f"NCCL version {v.group(1)!r} is short of its form"
        d = _DRIVER.match(line.message)
        if d and (len(d.group(1)) < 4 or line.message.strip() != d.group(0)):
            yield f"cudaDriverVersion {d.group(1)!r} is short of its digits"
    ends = [ln.message.endswith(".") for ln in log.lines if _ENV_SET.match(ln.message)]
    if ends.count(True) > ends.count(False) > 0:
        yield "a 'set by environment to' line without the period this NCCL ends them with"


@flag_clipped(_debug_cuts)
def parse_nccl_debug(text: str) -> NcclDebugLog:
    """NCCL_DEBUG=INFO lines from any log (srun/mpirun/ray prefixes and interleaved app lines are skipped)."""
    out = NcclDebugLog()
    for raw in clean_lines(text):
        m = _LOG.search(raw)
        if not m:
            if out.version is None and (b := _BARE_VERSION.search(raw)):
                out.version = b["v"]
            continue
        line = NcclLogLine(host=m["host"], pid=int(m["pid"]), tid=int(m["tid"]), device=int(m["dev"]),
                           level=m["level"], message=m["msg"])
        out.lines.append(line)
        msg = line.message
        if e := _ENV_SET.match(msg):
            value = e.group(2).strip().removesuffix(".")  # NCCL >= 2.2x ends the line with a period
            out.env.append(NcclEnvSetting(name=e.group(1), value=value, pid=line.pid, host=line.host))
        elif v := re.match(r"^NCCL version (\S+)", msg):
            out.version = out.version or v.group(1)
        elif d := _DRIVER.match(msg):
            out.cuda_driver = int(d.group(1))
        if line.level == "WARN":
            out.warnings.append(msg)
    return out
