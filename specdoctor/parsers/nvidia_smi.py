"""nvidia-smi parsers: `-L`, `--query-gpu` CSV, `-q` (clocks, power, PCIe link, processes) and `topo -m`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.parsers.text import TRUNCATED, ParsedList, clean_lines, cut_marker, flag_clipped, no_cut_check
from specdoctor.parsers.text import strip_ansi as _strip_ansi

__all__ = [
    "strip_ansi",
    "GpuListEntry",
    "parse_list",
    "parse_query_csv",
    "QGpu",
    "QReport",
    "parse_q",
    "Topology",
    "parse_topo",
]

_MISSING = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]"}


def strip_ansi(text: str) -> str:
    """Remove terminal colour/cursor escapes (pasted or `script`-captured output carries them)."""
    return _strip_ansi(text)


class GpuListEntry(BaseModel):
    """One `nvidia-smi -L` line."""

    index: int
    name: str
    uuid: str | None = None


_LIST_GPU = re.compile(r"^\s*GPU \d+: ")
_LIST_DONE = re.compile(r"\(UUID: GPU-[0-9a-fA-F-]{36}\)\s*$")


def _list_cuts(text: str, result: Any) -> Iterator[str]:
    """`-L`: every 'GPU N: name' line closes with '(UUID: GPU-<36 hex/dash>)'; one without it was cut."""
    for line in clean_lines(text):
        if _LIST_GPU.match(line) and not _LIST_DONE.search(line):
            yield f"a GPU line without its closing '(UUID: ...)': {line.strip()[:80]!r}"


@flag_clipped(_list_cuts)
def parse_list(text: str) -> list[GpuListEntry]:
    """`GPU 0: NAME (UUID: GPU-...)` lines; prompts and other lines are ignored."""
    out = []
    for m in re.finditer(r"^\s*GPU (\d+): (.+?)(?: \(UUID: ([^)]+)\))?\s*$", "\n".join(clean_lines(text)), re.M):
        out.append(GpuListEntry(index=int(m.group(1)), name=m.group(2).strip(), uuid=m.group(3)))
    return out


def _clean(value: str) -> str | None:
    v = value.strip()
    return None if v.lower() in _MISSING else v


def _csv_cuts(text: str, result: Any, fields: list[str] | None = None) -> Iterator[str]:
    """`--query-gpu` CSV: every row has one cell per queried field, and a column whose rows carry a unit
    ('MiB', 'MHz', 'W') carries it in every row; a row short of cells or of its unit was cut."""
    rows = [[c.strip() for c in ln.split(",")] for ln in clean_lines(text) if ln.strip()]
    if not rows:
        return
    width = len(fields) if fields else max(len(r) for r in rows)
    for row in rows:
        if 1 < len(row) < width:
            yield f"a row with {len(row)} of {width} cells: {', '.join(row)[-60:]!r}"
    full = [r for r in rows if len(r) == width]
    for col in range(width):
        units = {m.group(1) for r in full if (m := re.fullmatch(r"-?[\d.]+ (\S+)", r[col]))}
        if len(units) == 1:
            unit = units.pop()
            for r in full:
                if re.fullmatch(r"-?[\d.]+", r[col]):
                    yield f"{r[col]!r} without the column's unit {unit!r} (row {r[0]!r})"


@flag_clipped(no_cut_check)  # its rows are checked against the fields the caller queried, in the body
def parse_query_csv(text: str, fields: list[str]) -> list[dict[str, str | None]]:
    """Rows of `--query-gpu=... --format=csv,noheader[,nounits]`; a header row and unit suffixes are tolerated."""
    rows: ParsedList[dict[str, str | None]] = ParsedList()
    for line in clean_lines(text):
        if not line.strip() or line.strip().startswith(tuple(fields[:1])):
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            continue
        rows.append({f: _clean(c) for f, c in zip(fields, cells, strict=True)})
    rows.problems.extend(f"{TRUNCATED}: {r}" for r in _csv_cuts(text, rows, fields))
    return rows


def number(value: str | None) -> float | None:
    """`1785 MHz`, `310.00 W`, `16x`, `5` -> float; N/A -> None."""
    if value is None:
        return None
    m = re.match(r"\s*(-?[0-9]+(?:\.[0-9]+)?)", value)
    return float(m.group(1)) if m else None


class QGpu(BaseModel):
    """The fields specdoctor fingerprints from one GPU section of `nvidia-smi -q`."""

    bus_id: str
    name: str | None = None
    uuid: str | None = None
    persistence_mode: str | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    app_sm_clock_mhz: float | None = None
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    process_pids: list[int] = Field(default_factory=list)
    process_names: list[str] = Field(default_factory=list)


class QReport(BaseModel):
    """`nvidia-smi -q` header plus one QGpu per GPU section."""

    driver: str | None = None
    cuda: str | None = None
    gpus: list[QGpu] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list, description="What could not be read (cut, clipped), one line each.")


_KV = re.compile(r"^(?P<indent>\s*)(?P<key>[^:]+?)\s*:\s*(?P<value>.*)$")


def _section_value(lines: list[tuple[int, str, str | None]], path: list[str]) -> str | None:
    """Value at an indented key path (each element a key, matched case-insensitively) inside one GPU block."""
    depth = 0
    level_indent = -1
    for indent, key, value in lines:
        if depth and indent <= level_indent:
            return None  # left the section we were inside
        if key.lower() == path[depth].lower() and indent > level_indent:
            if depth == len(path) - 1:
                return value
            depth += 1
            level_indent = indent
    return None


def _first(lines: list[tuple[int, str, str | None]], *paths: list[str]) -> str | None:
    for p in paths:
        v = _section_value(lines, p)
        if v is not None and _clean(v) is not None:
            return _clean(v)
    return None


# `-q` values whose form nvidia-smi fixes: a cut leaves them short of it.
_HEX = "[0-9A-Fa-f]"
_Q_FORMS = {
    "Timestamp": r"\w{3} \w{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}",
    "Driver Version": r"\d+\.\d+(?:\.\d+)*",
    "CUDA Version": r"\d+\.\d+",
    "Bus Id": rf"{_HEX}{{4,8}}:{_HEX}{{2}}:{_HEX}{{2}}\.{_HEX}",
    "GPU UUID": rf"GPU-{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}",
}
# A measured value: a number and its unit ('1980 MHz', '700.00 W', '81559 MiB', '37 %', '35 C', '16x').
_Q_UNITS = ("MHz", "GHz", "KiB", "MiB", "GiB", "KB/s", "MB/s", "GB/s", "W", "mW", "mV", "%", "C", "ms", "us", "ns",
            "bytes", "bank(s)")
_Q_MEASURED = re.compile(r"^-?\d+(?:\.\d+)? (?P<unit>\S+)$")


def cut_number(value: str) -> bool:
    """'11.', '300.': a number cut right after its decimal point."""
    return re.fullmatch(r"-?\d+\.", value) is not None


def _cut_unit(value: str) -> bool:
    """'0 M', '2000 Mi': a number and the beginning of one of -q's units (other words after a number are left)."""
    m = _Q_MEASURED.match(value)
    return m is not None and cut_marker(m["unit"], *_Q_UNITS) is not None


def _q_cuts(text: str, result: Any) -> Iterator[str]:
    """`-q`: every leaf is 'Key : value' (a line without ':' heads a more indented section); the fixed-form
    values (timestamp, driver, CUDA, bus id, UUID) have their whole form, and a number that is followed by a
    word is followed by its whole unit ('1980 MHz', not '1980 M'); anything short of that was cut."""
    if not result.gpus and result.driver is None:
        return  # not -q text: nothing of its structure to check
    lines = [ln for ln in clean_lines(text) if ln.strip()]
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        kv = _KV.match(line)
        if kv is None:
            deeper = i + 1 < len(lines) and len(lines[i + 1]) - len(lines[i + 1].lstrip()) > indent
            if indent and not deeper:
                yield f"a key without its ': value': {line.strip()[:60]!r}"
            continue
        key, value = kv["key"].strip(), kv["value"]
        if not value.strip():
            yield f"{key} without its value"
            continue
        form = _Q_FORMS.get(key)
        if value and form and not re.fullmatch(form, value.strip()) and _clean(value) is not None:
            yield f"{key} {value.strip()!r} is short of its form"
        elif value and not form and (cut_number(value.strip()) or _cut_unit(value.strip())):
            yield f"{key} {value.strip()!r} is cut inside its number or unit"


_QLine = tuple[int, str, str | None]  # one `-q` line inside a GPU block: indent, key, value


def _q_blocks(text: str, report: QReport) -> list[tuple[str, list[_QLine]]]:
    """Cut `-q` into one block of (indent, key, value) lines per 'GPU <bus id>' section; the header's driver and
    CUDA versions go straight onto the report."""
    blocks: list[tuple[str, list[_QLine]]] = []
    for raw in clean_lines(text):
        if not raw.strip():
            continue
        m = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$", raw.strip())
        if m and not raw.startswith(" "):
            blocks.append((m.group(1), []))
            continue
        kv = _KV.match(raw)
        indent = len(raw) - len(raw.lstrip())
        key, value = (kv.group("key").strip(), kv.group("value").strip()) if kv else (raw.strip(), None)
        if not blocks:
            if key == "Driver Version" and value:
                report.driver = value
            elif key == "CUDA Version" and value:
                report.cuda = value
            continue
        blocks[-1][1].append((indent, key, value))
    return blocks


def _link_int(lines: list[_QLine], *path: str) -> int | None:
    """A PCIe link generation or width under 'GPU Link Info' (0 or unreadable -> None)."""
    return int(number(_first(lines, ["GPU Link Info", *path])) or 0) or None


def _q_processes(gpu: QGpu, lines: list[_QLine]) -> None:
    """The block's 'Process ID' lines, each with the 'Name' that follows it."""
    for _, key, value in lines:
        if key == "Process ID" and value and value.isdigit():
            gpu.process_pids.append(int(value))
        elif key == "Name" and value and gpu.process_pids and len(gpu.process_names) < len(gpu.process_pids):
            gpu.process_names.append(value)


def _q_gpu(bus: str, lines: list[_QLine]) -> QGpu:
    """One GPU section's fingerprinted fields."""
    gpu = QGpu(bus_id=bus)
    gpu.name = _first(lines, ["Product Name"])
    gpu.uuid = _first(lines, ["GPU UUID"])
    gpu.persistence_mode = _first(lines, ["Persistence Mode"])
    gpu.pcie_gen_current = _link_int(lines, "PCIe Generation", "Current")
    gpu.pcie_gen_max = _link_int(lines, "PCIe Generation", "Max")
    gpu.pcie_width_current = _link_int(lines, "Link Width", "Current")
    gpu.pcie_width_max = _link_int(lines, "Link Width", "Max")
    gpu.sm_clock_mhz = number(_first(lines, ["Clocks", "SM"]))
    gpu.mem_clock_mhz = number(_first(lines, ["Clocks", "Memory"]))
    gpu.max_sm_clock_mhz = number(_first(lines, ["Max Clocks", "SM"]))
    gpu.app_sm_clock_mhz = number(_first(lines, ["Applications Clocks", "Graphics"]))
    gpu.power_limit_w = number(_first(lines, ["GPU Power Readings", "Current Power Limit"],
                                      ["Power Readings", "Enforced Power Limit"],
                                      ["Power Readings", "Power Limit"]))
    gpu.default_power_limit_w = number(_first(lines, ["GPU Power Readings", "Default Power Limit"],
                                              ["Power Readings", "Default Power Limit"]))
    _q_processes(gpu, lines)
    return gpu


@flag_clipped(_q_cuts)
def parse_q(text: str) -> QReport:
    """Parse `nvidia-smi -q` (old 'Power Readings'/'Throttle' and new 'GPU Power Readings' layouts)."""
    report = QReport()
    for bus, lines in _q_blocks(text, report):
        report.gpus.append(_q_gpu(bus, lines))
    return report


class Topology(BaseModel):
    """`nvidia-smi topo -m`: link type per device pair, CPU/NUMA affinity per GPU."""

    devices: list[str] = Field(default_factory=list, description="Matrix columns in order (GPUn, NICn, mlx5_n).")
    links: dict[str, dict[str, str]] = Field(default_factory=dict)
    cpu_affinity: dict[str, str | None] = Field(default_factory=dict)
    numa_affinity: dict[str, str | None] = Field(default_factory=dict)
    gpu_numa_id: dict[str, str | None] = Field(default_factory=dict)
    truncated: bool = Field(default=False, description="Columns or fields were clipped (narrow terminal, cut paste).")
    problems: list[str] = Field(default_factory=list, description="What was clipped or unreadable, one line each.")

    @property
    def gpus(self) -> list[str]:
        return [d for d in self.devices if d.startswith("GPU")]

    def link_kinds(self) -> dict[str, int]:
        """How many GPU pairs use each link kind (NV18, PIX, SYS, ...): a compact topology signature."""
        counts: dict[str, int] = {}
        gpus = self.gpus
        for i, a in enumerate(gpus):
            for b in gpus[i + 1:]:
                kind = self.links.get(a, {}).get(b)
                if kind:
                    counts[kind] = counts.get(kind, 0) + 1
        return counts


_AFFINITY_COLS = [("CPU Affinity", "@CPU"), ("NUMA Affinity", "@NUMA"), ("GPU NUMA ID", "@GNUMA")]
# Matrix rows/columns: GPUn, NICn, or (before NICn naming) the NIC's own name: lower case, ending in a digit
# (mlx5_0, mlx5_bond_0, bnxt_re0); header words (CPU, Affinity, NUMA, ID) never match.
_DEVICE = re.compile(r"^(?:GPU\d+|NIC\d+|[a-z][a-z0-9_]*\d)$")
_LINK = re.compile(r"^(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NS|OK|CNS|TNS|NA|N/A)$")
_CPU_LIST = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")


_Row = tuple[str, list[str], list[str]]  # a matrix row: its name, its link cells, the affinity cells after them


def _topo_header(lines: list[str]) -> tuple[int, list[str]] | None:
    """The matrix's header line (it opens with GPU0, and is not GPU0's own row) and its columns, the affinity
    phrases folded into one '@' token each."""
    for i, line in enumerate(lines):
        norm = line
        for phrase, token in _AFFINITY_COLS:
            norm = norm.replace(phrase, f" {token} ")
        toks = norm.split()
        if toks and toks[0] == "GPU0" and len(toks) > 1 and toks[1] != "X":
            return i, toks
    return None


def _header_devices(topo: Topology, cols: list[str]) -> list[str]:
    """The header's device columns; a clipped last one ('NI', 'CPU Aff') is flagged (the rows name it later)."""
    devices = [c for c in cols if not c.startswith("@") and _DEVICE.match(c)]
    if len(devices) < len([c for c in cols if not c.startswith("@")]):
        topo.truncated = True
        topo.problems.append(f"{TRUNCATED}: header clipped after {devices[-1] if devices else 'GPU0'}: {_line_tail(cols)}")
    return devices


def _matrix_row(toks: list[str]) -> _Row:
    """Split a row into its name, its link cells (up to the first token that is no link) and the rest."""
    cells = []
    for t in toks[1:]:
        if not _LINK.match(t):
            break
        cells.append(t)
    return toks[0], cells, toks[1 + len(cells):]


def _matrix_rows(topo: Topology, body: list[str]) -> list[_Row]:
    """The device rows below the header, up to a blank line or a non-device line; a wrapped row's tail on its own
    line is flagged and skipped."""
    rows: list[_Row] = []
    for line in body:
        toks = line.split()
        if not toks:
            if rows:
                break
            continue
        if not _DEVICE.match(toks[0]):
            if rows and all(_CPU_LIST.match(t.strip(",-")) or t == "N/A" for t in toks):
                topo.truncated = True  # a wrapped row's tail on its own line
                topo.problems.append(f"{TRUNCATED}: row {rows[-1][0]} wrapped: {line.strip()[:60]!r} continues it")
                continue
            break
        rows.append(_matrix_row(toks))
    return rows


def _matrix_columns(topo: Topology, devices: list[str], rows: list[_Row], cols: list[str]) -> list[str]:
    """The matrix's columns: the header's devices, or, where rows hold more link cells than the header names,
    the clipped columns named from the rows (the matrix is square and in column order) or as '?j'."""
    names = [r[0] for r in rows]
    width = max((len(r[1]) for r in rows), default=0)
    if width > len(devices):
        if names[:len(devices)] == devices and len(names) >= width:
            devices = names[:width]
        else:
            devices = devices + [f"?{j}" for j in range(len(devices), width)]
        if not topo.truncated:
            topo.truncated = True
            topo.problems.append(f"{TRUNCATED}: {width} matrix columns but {len(topo.devices or cols)} headers")
    return devices


def _flag_short_rows(topo: Topology, rows: list[_Row]) -> None:
    """A row with fewer link cells than the matrix has columns was cut (flagged only if nothing was yet)."""
    names = [r[0] for r in rows]
    short = [name for name, cells, _ in rows if len(cells) < min(len(topo.devices), len(names))]
    if short and not topo.truncated:
        topo.truncated = True
        topo.problems.append(f"{TRUNCATED}: row {short[0]} has fewer link cells than the {len(topo.devices)} columns")


def _gpu_affinity(topo: Topology, name: str, rest: list[str], extra: list[str]) -> None:
    """One GPU row's CPU/NUMA affinity cells (unfused where pasted together); a count off the header's or a
    clipped CPU list is flagged."""
    if len(rest) < len(extra) and rest:
        rest = _unfuse(rest, len(extra))
    if len(rest) != len(extra) and not topo.truncated:
        topo.truncated = True  # fewer: the row was cut; more: the header lost its last names
        topo.problems.append(f"{TRUNCATED}: row {name} has {len(rest)} affinity cells, the header "
                             f"names {len(extra)}")
    values = dict(zip(extra, rest, strict=False))
    cpu = _clean(values.get("@CPU", ""))
    if cpu is not None and not _CPU_LIST.match(cpu):
        topo.truncated = True
        topo.problems.append(f"{TRUNCATED}: {name} CPU affinity {cpu!r} looks clipped; not used")
        cpu = None
    topo.cpu_affinity[name] = cpu
    topo.numa_affinity[name] = _clean(values.get("@NUMA", ""))
    if "@GNUMA" in extra:
        topo.gpu_numa_id[name] = _clean(values.get("@GNUMA", ""))


@flag_clipped(no_cut_check)  # the matrix checks its own rows against its header, in the body
def parse_topo(text: str) -> Topology:
    """Parse the first link matrix (tabs or spaces, prompts, fused affinity columns, clipped header or fields)."""
    topo = Topology()
    lines = clean_lines(text)
    header = _topo_header(lines)
    if header is None:
        return topo
    header_at, cols = header
    extra = [c for c in cols if c.startswith("@")]
    devices = _header_devices(topo, cols)
    rows = _matrix_rows(topo, lines[header_at + 1:])
    topo.devices = _matrix_columns(topo, devices, rows, cols)
    _flag_short_rows(topo, rows)
    for name, cells, rest in rows:
        topo.links[name] = {d: c for d, c in zip(topo.devices, cells, strict=False)
                            if d != name and c != "X" and not d.startswith("?")}
        if name.startswith("GPU") and extra:
            _gpu_affinity(topo, name, rest, extra)
    return topo


def _line_tail(cols: list[str]) -> str:
    """The last few header tokens, for a problem message."""
    return " ".join(c for c in cols[-3:] if not c.startswith("@"))[:40]


def _unfuse(rest: list[str], want: int) -> list[str]:
    """Split '0-47,96-1430N/A' (columns pasted without separators) into CPU list, NUMA node, GPU NUMA ID."""
    joined = "".join(rest)
    m = re.match(r"^(?P<cpu>[0-9,\-]*?)(?P<numa>\d)(?P<gnuma>N/A|\d+)?$", joined)
    if not m:
        return rest
    parts = [m.group("cpu"), m.group("numa")] + ([m.group("gnuma")] if m.group("gnuma") else [])
    return parts[:want]
