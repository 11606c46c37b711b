"""Pure parsers for git's machine-readable output (-z forms, stash/submodule lists) and diff-line classification."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import unidiff
from pydantic import BaseModel, Field

from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.text import TRUNCATED, clean_lines, clean_text, flag_clipped, no_cut_check

__all__ = [
    "NumStat",
    "StashEntry",
    "SubmoduleState",
    "split_z",
    "parse_numstat_z",
    "DiffStatFile",
    "DiffStat",
    "parse_diff_stat",
    "parse_name_status_z",
    "parse_stash_list",
    "parse_submodule_status",
    "unquote_c_path",
    "is_logging_line",
    "logging_only",
    "Ambiguous",
    "ambiguous_lines",
    "select_hunks",
    "BackupInfo",
    "REF_MARKER",
    "parse_backup_refs",
]


class NumStat(BaseModel):
    """Added/removed line counts of one path (None for binary files)."""

    path: str
    added: int | None
    removed: int | None

    @property
    def binary(self) -> bool:
        return self.added is None


class StashEntry(BaseModel):
    """One `git stash list` entry."""

    index: int
    sha: str
    subject: str


class SubmoduleState(BaseModel):
    """One `git submodule status` line: ' ' clean, '+' other commit checked out, '-' absent, 'U' conflicts."""

    path: str
    sha: str
    flag: str = Field(description="' ', '+', '-' or 'U' as git prints it.")
    describe: str | None = None

    @property
    def moved(self) -> bool:
        return self.flag in ("+", "U")


def split_z(text: str) -> list[str]:
    """NUL-separated fields, the trailing empty one dropped."""
    parts = clean_text(text).split("\x00")
    return parts[:-1] if parts and parts[-1] == "" else parts


def parse_numstat_z(text: str) -> list[NumStat]:
    """`git diff --numstat -z --no-renames`: 'added<TAB>removed<TAB>path<NUL>' ('-' counts for binary).

    ParseError on a record of another shape (e.g. `git diff --stat` text: use parse_diff_stat for that)."""
    out: list[NumStat] = []
    for rec in split_z(text):
        if not rec:
            continue
        m = re.fullmatch(r"(\d+|-)\t(\d+|-)\t(.+)", rec, re.S)
        if not m:
            hint = " (this looks like `git diff --stat`)" if "|" in rec else ""
            raise ParseError(f"not a --numstat -z record{hint}: {rec[:80]!r}")
        added, removed, path = m.groups()
        out.append(NumStat(path=path, added=None if added == "-" else int(added),
                           removed=None if removed == "-" else int(removed)))
    return out


class DiffStatFile(BaseModel):
    """One `path | N +++--` line of `git diff --stat`."""

    path: str = Field(description="As printed: may be abbreviated ('.../x.py') or a rename ('a/{b => c}/d').")
    changes: int | None = Field(default=None, description="Changed lines; None for a binary file.")
    plus: int = Field(default=0, description="'+' marks in the graph (scaled when the stat is wide).")
    minus: int = Field(default=0, description="'-' marks in the graph.")
    binary: bool = False
    bytes_before: int | None = None
    bytes_after: int | None = None
    abbreviated: bool = Field(default=False, description="git shortened the path with '...'.")
    rename_from: str | None = None
    rename_to: str | None = None


class DiffStat(BaseModel):
    """`git diff --stat` output: the per-file lines and the summary line."""

    files: list[DiffStatFile] = Field(default_factory=list)
    files_changed: int | None = None
    insertions: int = 0
    deletions: int = 0
    problems: list[str] = Field(default_factory=list, description="What could not be read (cut, clipped), one line each.")

    @property
    def consistent(self) -> bool:
        """Whether the summary's file count matches the lines read (False when lines were cut or elided)."""
        return self.files_changed is None or self.files_changed == len(self.files)


_STAT_LINE = re.compile(r"^\s*(?P<path>\S.*?)\s+\|\s+(?:(?P<n>\d+)(?:\s+(?P<graph>[+-]+))?|"
                        r"Bin(?:\s+(?P<b0>\d+)\s+->\s+(?P<b1>\d+)\s+bytes)?)\s*$")
# A file line a narrow terminal cut before its '| N' (or a pasted path alone under a stat block).
_CUT_STAT = re.compile(r"^\s(?=\S*[/.])\S+\s*(?:\|\s*\d*)?\s*$")
_SUMMARY = re.compile(r"^\s*(?P<files>\d+) files? changed(?:, (?P<ins>\d+) insertions?\(\+\))?"
                      r"(?:, (?P<del>\d+) deletions?\(-\))?\s*$")


def _rename(path: str) -> tuple[str | None, str | None]:
    m = re.search(r"\{(?P<a>[^{}]*) => (?P<b>[^{}]*)\}", path)
    if m:
        pre, post = path[:m.start()], path[m.end():]
        return ((pre + m["a"] + post).replace("//", "/"), (pre + m["b"] + post).replace("//", "/"))
    if " => " in path:
        a, _, b = path.partition(" => ")
        return a, b
    return None, None


@flag_clipped(no_cut_check)  # the stat checks its lines and totals itself, in the body
def parse_diff_stat(text: str) -> DiffStat:
    """`git diff --stat` (also `git show --stat`, `git log --stat` bodies): every file line and the totals."""
    stat = DiffStat()
    for line in clean_lines(text):
        if m := _SUMMARY.match(line):
            stat.files_changed = int(m["files"])
            stat.insertions, stat.deletions = int(m["ins"] or 0), int(m["del"] or 0)
            continue
        m = _STAT_LINE.match(line)
        if not m:
            if _CUT_STAT.match(line):
                stat.problems.append(f"{TRUNCATED}: a stat line without its count: {line.strip()[:80]!r}")
            continue
        path = m["path"]
        graph = m["graph"] or ""
        a, b = _rename(path)
        binary = m["n"] is None
        stat.files.append(DiffStatFile(path=path, changes=None if binary else int(m["n"]), plus=graph.count("+"),
                                       minus=graph.count("-"), binary=binary,
                                       bytes_before=int(m["b0"]) if m["b0"] else None,
                                       bytes_after=int(m["b1"]) if m["b1"] else None,
                                       abbreviated=path.startswith("..."), rename_from=a, rename_to=b))
        if "{" in path and "}" not in path:
            stat.problems.append(f"{TRUNCATED}: rename cut before its '}}': {path[:80]!r}")
    _check_totals(stat)
    return stat


def _check_totals(stat: DiffStat) -> None:
    """The summary line is the check a clipped or cut stat fails: its file count and line totals."""
    if stat.files_changed is None:
        return
    counted = sum(f.changes or 0 for f in stat.files)
    if stat.files_changed != len(stat.files):
        stat.problems.append(f"{TRUNCATED}: the summary says {stat.files_changed} files, {len(stat.files)} lines read")
    elif counted != stat.insertions + stat.deletions:
        stat.problems.append(f"{TRUNCATED}: the lines count {counted} changed lines, the summary "
                             f"{stat.insertions + stat.deletions}")


def parse_name_status_z(text: str) -> dict[str, str]:
    """`git diff --name-status -z --no-renames`: 'M<NUL>path<NUL>' pairs → {path: status letter}."""
    fields = split_z(text)
    out: dict[str, str] = {}
    i = 0
    while i + 1 < len(fields):
        status, path = fields[i], fields[i + 1]
        out[path] = status[:1]
        i += 2
    return out


def _stash_cuts(text: str, result: Any) -> Iterator[str]:
    """'<40-hex sha>NUL<subject>': an entry whose sha is short of 40 hex digits or lacks its NUL was cut."""
    for line in (x for x in clean_lines(text) if x.strip()):
        sha, nul, _ = line.partition("\x00")
        if not nul or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha.strip()):
            yield f"a stash entry without its full sha and subject: {line[:60]!r}"
            return


@flag_clipped(_stash_cuts)
def parse_stash_list(text: str) -> list[StashEntry]:
    """`git stash list --format=%H%x00%gs` (one entry per line, newest first)."""
    out: list[StashEntry] = []
    for i, line in enumerate(x for x in clean_lines(text) if x.strip()):
        sha, _, subject = line.partition("\x00")
        out.append(StashEntry(index=i, sha=sha.strip(), subject=subject))
    return out


_SUBMODULE = re.compile(r"^(?P<flag>[ +\-U])(?P<sha>[0-9a-f]{7,64}) (?P<path>.+?)(?: \((?P<describe>[^()]*)\))?$")


def _submodule_cuts(text: str, result: Any) -> Iterator[str]:
    """'<flag><40-hex sha> <path>[ (<describe>)]': a line whose sha is short, or whose '(' is never closed, was cut."""
    for line in clean_lines(text):
        if not line.strip():
            continue
        m = _SUBMODULE.match(line)
        if (m is None and re.match(r"^[ +\-U][0-9a-f]", line)) or (m and len(m["sha"]) not in (40, 64)) or (
                m and " (" in m["path"] and not m["describe"]):
            yield f"a submodule line cut: {line.strip()[-60:]!r}"
            return


@flag_clipped(_submodule_cuts)
def parse_submodule_status(text: str) -> list[SubmoduleState]:
    """`git submodule status` lines."""
    out: list[SubmoduleState] = []
    for line in clean_lines(text):
        m = _SUBMODULE.match(line)
        if m:
            out.append(SubmoduleState(path=m["path"], sha=m["sha"], flag=m["flag"], describe=m["describe"]))
    return out


_ESCAPES = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b", "f": b"\f", "r": b"\r",
            "v": b"\v"}


def unquote_c_path(path: str, strip_prefix: bool = True) -> str:
    """Undo git's C-style path quoting ("a/sp\\303\\251" → 'sp\u00e9') and drop an a/ or b/ prefix."""
    if len(path) >= 2 and path[0] == '"' and path[-1] == '"':
        body, buf, i = path[1:-1], bytearray(), 0
        while i < len(body):
            ch = body[i]
            if ch == "\\" and i + 1 < len(body):
                nxt = body[i + 1]
                if nxt in "01234567" and re.fullmatch(r"[0-7]{3}", body[i + 1:i + 4]):
                    buf.append(int(body[i + 1:i + 4], 8))
                    i += 4
                    continue
                buf += _ESCAPES.get(nxt, nxt.encode())
                i += 2
                continue
            buf += ch.encode("utf-8", "surrogateescape")
            i += 1
        path = buf.decode("utf-8", "surrogateescape")
    if strip_prefix and path[:2] in ("a/", "b/"):
        path = path[2:]
    return path


_LOG_START = re.compile(
    r"^\s*(?:(?:self\.|cls\.)?(?:logger|logging|_logger|log|LOGGER)\.(?:debug|info|warning|warn|error|exception|"
    r"critical|log|info_once|warning_once)\s*\(|print\s*\(|warnings\.warn\s*\(|print_rank_0\s*\(|"
    r"rank0_log\s*\(|rank0_print\s*\()"
)


_CONTROL = re.compile(r"^\s*(?:for\s[^:]+\sin\s.+|if\s.+|elif\s.+|else|try|finally|except(?:\s.*)?)\s*:\s*(?:#.*)?$")


def is_logging_line(line: str) -> bool:
    """A single line that is blank, a comment, or starts a logging/print call."""
    s = line.strip()
    return not s or s.startswith("#") or bool(_LOG_START.match(line))


def _paren_balance(line: str) -> int:
    code = re.sub(r"""(['"])(?:\\.|(?!\1).)*\1""", "", line.split("#", 1)[0] if '"' not in line and "'" not in line
                  else line)
    return code.count("(") + code.count("[") + code.count("{") - code.count(")") - code.count("]") - code.count("}")


def logging_only(lines: list[str]) -> bool:
    """True when every changed line is a logging call (multi-line calls included), print, comment or blank."""
    if not lines:
        return False
    depth, logs = 0, 0
    for line in lines:
        if depth > 0:
            depth += _paren_balance(line)
            continue
        if not line.strip() or line.strip().startswith("#"):
            continue
        if _LOG_START.match(line):
            depth, logs = max(0, _paren_balance(line)), logs + 1
            continue
        if _CONTROL.match(line):  # a loop/branch header whose body is only logging
            continue
        return False
    return logs > 0 or all(not ln.strip() or ln.strip().startswith("#") for ln in lines)


class Ambiguous(BaseModel):
    """A patch-script output line that does not say cleanly 'applied'."""

    line_no: int
    kind: str = Field(description="WARN / SKIP / ERROR / could-not-find / FAIL / exit-code")
    line: str


_AMBIGUOUS = [("WARN", re.compile(r"\bWARN(?:ING)?\b", re.I)), ("SKIP", re.compile(r"\bSKIP(?:PED|PING)?\b", re.I)),
              ("ERROR", re.compile(r"\bERROR\b|\bTraceback\b", re.I)), ("FAIL", re.compile(r"\bFAIL(?:ED|URE)?\b", re.I)),
              ("could-not-find", re.compile(r"could\s*n[o']t\s+find|not\s+found", re.I))]


def ambiguous_lines(output: str, exit_code: int = 0) -> list[Ambiguous]:
    """Flag WARN / SKIP / ERROR / FAIL / 'could not find' lines (quoted) and a non-zero exit of a patch script."""
    out: list[Ambiguous] = []
    for i, line in enumerate(output.splitlines(), 1):
        kinds = [k for k, pat in _AMBIGUOUS if pat.search(line)]
        if kinds:
            out.append(Ambiguous(line_no=i, kind="+".join(kinds), line=line.strip()))
    if exit_code != 0:
        out.append(Ambiguous(line_no=0, kind="exit-code", line=f"the script exited with status {exit_code}"))
    return out


def select_hunks(diff: str, wanted: list[int]) -> tuple[str, list[str]]:
    """A patch with only the `wanted` hunks of a one-file diff, and their changed lines (ParseError if absent)."""
    try:
        files = list(unidiff.PatchSet(diff))
    except unidiff.UnidiffParseError as exc:
        raise ParseError(f"not a unified diff: {exc}") from None
    if not files:
        raise ParseError("no textual patch")
    hunks = list(files[0])
    bad = [i for i in wanted if i < 0 or i >= len(hunks)]
    if bad:
        raise ParseError(f"{len(hunks)} hunks; no hunk {bad}")
    header = diff.split("\n@@", 1)[0] + "\n"
    chosen = sorted(set(wanted))
    lines = [ln.value for i in chosen for ln in hunks[i] if ln.is_added or ln.is_removed]
    return header + "".join(str(hunks[i]) for i in chosen), lines


class BackupInfo(BaseModel):
    """One specdoctor backup ref as listed by `specdoctor restore --list`."""

    backup_id: str
    commit: str
    created: str
    head: str
    branch: str | None
    changed: int
    stashes: int
    hash: str
    restored: bool


REF_MARKER = "@@specdoctor-ref@@"


def parse_backup_refs(text: str, backup_ns: str, restored_ns: str) -> list[BackupInfo]:
    """`git for-each-ref --format=MARKER%(refname)%00%(objectname)%00%(contents)` → backups (JSON messages)."""
    restored: dict[str, str] = {}
    out: list[BackupInfo] = []
    for rec in clean_text(text).split(REF_MARKER)[1:]:
        name, sha, body = (rec.split("\x00", 2) + ["", ""])[:3]
        sha = sha.strip()
        if name.startswith(restored_ns):
            restored[name.removeprefix(restored_ns)] = sha
            continue
        try:
            meta = json.loads(body) if name.startswith(backup_ns) else None
        except ValueError:
            meta = None
        if isinstance(meta, dict):
            out.append(BackupInfo(backup_id=name.removeprefix(backup_ns), commit=sha, created=meta.get("created", ""),
                                  head=meta.get("head", ""), branch=meta.get("branch"),
                                  changed=len(meta.get("changed", [])), stashes=len(meta.get("stashes", [])),
                                  hash=meta.get("hash", ""), restored=False))
    for info in out:
        info.restored = restored.get(info.backup_id) == info.commit
    return out
