"""The plain `nvidia-smi` table: driver and CUDA versions, one row per GPU, the processes (old and new layouts)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.parsers.text import clean_lines, flag_clipped

__all__ = ["SmiTableGpu", "SmiProcess", "SmiTable", "parse_smi_table"]


class SmiTableGpu(BaseModel):
    """One GPU block of the table (two or three lines); None where the table says N/A or leaves it out."""

    index: int
    name: str
    name_clipped: bool = Field(default=False, description="nvidia-smi cut the name ('Tesla V100-SXM2...').")
    persistence: str | None = Field(default=None, description="On / Off (TCC / WDDM on Windows).")
    bus_id: str | None = None
    display_active: str | None = None
    ecc_errors: str | None = Field(default=None, description="Volatile uncorrected ECC: a count, N/A or Off.")
    fan_pct: int | None = None
    temp_c: int | None = None
    perf: str | None = Field(default=None, description="P0 ... P12.")
    power_w: float | None = None
    power_cap_w: float | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    util_pct: int | None = None
    compute_mode: str | None = None
    mig_mode: str | None = None


class SmiProcess(BaseModel):
    """One row of the Processes section."""

    gpu: int
    gi: str | None = None
    ci: str | None = None
    pid: int
    type: str
    name: str
    memory_mib: int | None = None


class SmiTable(BaseModel):
    """What one `nvidia-smi` table says."""

    smi_version: str | None = None
    driver: str | None = None
    cuda: str | None = Field(default=None, description="The highest CUDA the driver supports, as printed.")
    layout: str | None = Field(default=None, description="'new' (driver >= 525, wide first column) or 'old'.")
    gpus: list[SmiTableGpu] = Field(default_factory=list)
    processes: list[SmiProcess] = Field(default_factory=list)
    no_processes: bool = Field(default=False, description="The table said 'No running processes found'.")
    problems: list[str] = Field(default_factory=list, description="What could not be read (cut, clipped), one line each.")


_HEAD = re.compile(r"NVIDIA-SMI\s+(?P<smi>\S+)\s+Driver Version:\s*(?P<drv>\S+)(?:\s+CUDA Version:\s*(?P<cuda>\S+))?")
_ROW1 = re.compile(r"^\s*(?P<idx>\d+)\s+(?P<name>.+?)\s+(?P<pm>On|Off|TCC|WDDM)\s*$")
_BUS = re.compile(r"^\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s+(?P<disp>\S+)\s*$")
_ROW2 = re.compile(r"^\s*(?P<fan>\d+%|N/A|ERR!)\s+(?P<temp>\d+C|N/A|ERR!)\s+(?P<perf>P\d+|N/A|ERR!)\s+"
                   r"(?P<pw>\S+?)\s*/\s*(?P<cap>\S+)\s*$")
_MEM = re.compile(r"(?P<used>\d+)\s*MiB\s*/\s*(?P<total>\d+)\s*MiB")
_UTIL = re.compile(r"^\s*(?P<util>\d+%|N/A|ERR!)\s+(?P<mode>\S+(?:\s\S+)?)\s*$")
_PROC = re.compile(r"^\s*(?P<gpu>\d+)\s+(?:(?P<gi>\S+)\s+(?P<ci>\S+)\s+)?(?P<pid>\d+)\s+(?P<type>C\+G|M\+C|C|G|M)\s+"
                   r"(?P<name>.+?)\s+(?P<mem>\d+MiB|N/A)\s*$")


def _int(v: str | None) -> int | None:
    m = re.match(r"\d+", v or "")
    return int(m.group(0)) if m else None


def _watts(v: str) -> float | None:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)W", v.strip())
    return float(m.group(1)) if m else None


def _cells(line: str) -> list[str]:
    s = line.strip()
    if not (s.startswith("|") and s.endswith("|")):
        return []
    return s[1:-1].split("|")


def _table_cuts(text: str, result: Any) -> Iterator[str]:
    """The table's rows and rules open with '|' or '+' and close with '|' or '+': a row or rule that opens but
    does not close was cut."""
    for line in clean_lines(text):
        s = line.strip()
        if s[:1] in "|+" and len(s) > 1 and s[-1] not in "|+" and (s[0] == "|" or set(s) <= set("+-=|")):
            yield f"a table line that does not close: {s[-60:]!r}"
            return


def _read_process(table: SmiTable, line: str, cells: list[str]) -> None:
    """A line of the Processes table: one process, or the 'No running processes found' note."""
    if "No running processes found" in line:
        table.no_processes = True
    elif len(cells) == 1 and (p := _PROC.match(cells[0])):
        table.processes.append(SmiProcess(gpu=int(p["gpu"]), gi=p["gi"], ci=p["ci"], pid=int(p["pid"]),
                                          type=p["type"], name=p["name"], memory_mib=_int(p["mem"])))


def _open_gpu(table: SmiTable, cells: list[str], r1: re.Match[str], b: re.Match[str]) -> SmiTableGpu:
    """A GPU block's first row (index, name, persistence | bus id, display | ECC) opens its entry; the first
    one also tells the table's layout by its width."""
    if table.layout is None:
        table.layout = "new" if len(cells[0]) >= 40 else "old"
    name = r1["name"].strip()
    gpu = SmiTableGpu(index=int(r1["idx"]), name=name.removesuffix("...").strip(),
                      name_clipped=name.endswith("..."), persistence=r1["pm"], bus_id=b["bus"],
                      display_active=b["disp"], ecc_errors=cells[2].strip() or None)
    table.gpus.append(gpu)
    return gpu


def _read_gpu_row(current: SmiTableGpu, cells: list[str]) -> None:
    """A GPU block's later rows: fan, temperature, perf, power | memory | utilisation and compute mode (the
    first such row), then the MIG mode row."""
    if (r2 := _ROW2.match(cells[0])) and current.perf is None:
        current.fan_pct, current.temp_c = _int(r2["fan"]), _int(r2["temp"])
        current.perf = r2["perf"] if r2["perf"].startswith("P") else None
        current.power_w, current.power_cap_w = _watts(r2["pw"]), _watts(r2["cap"])
        if m := _MEM.search(cells[1]):
            current.memory_used_mib, current.memory_total_mib = int(m["used"]), int(m["total"])
        if u := _UTIL.match(cells[2]):
            current.util_pct, current.compute_mode = _int(u["util"]), u["mode"]
    elif not cells[0].strip() and cells[2].strip() and current.perf is not None:
        current.mig_mode = cells[2].strip()


@flag_clipped(_table_cuts)
def parse_smi_table(text: str) -> SmiTable:
    """Every GPU row and process of the first table in `text` (prompts, srun labels, ANSI and CRs tolerated)."""
    table = SmiTable()
    current: SmiTableGpu | None = None
    in_procs = False
    for line in clean_lines(text):
        if table.driver is None and (h := _HEAD.search(line)):
            table.smi_version, table.driver, table.cuda = h["smi"], h["drv"], h["cuda"]
            continue
        if "Processes:" in line or ("PID" in line and "Process name" in line):
            in_procs, current = True, None
            continue
        cells = _cells(line)
        if in_procs:
            _read_process(table, line, cells)
            continue
        if len(cells) != 3:
            if line.strip().startswith("+") and current is not None:
                current = None  # a block ends at its +----+ rule
            continue
        if (r1 := _ROW1.match(cells[0])) and (b := _BUS.match(cells[1])):
            current = _open_gpu(table, cells, r1, b)
        elif current is not None:
            _read_gpu_row(current, cells)
    return table
