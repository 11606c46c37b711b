"""The one decoration clean-up every parser reads through: ANSI escapes, CR line ends, launcher rank labels and
wrapping loggers' prefixes, so a line parser and a JSON/-z parser accept the same pasted or captured text."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["ANSI", "strip_ansi", "strip_rank_prefix", "strip_decoration", "clean_lines", "clean_text",
           "TRUNCATED", "ParsedList", "CutCheck",
           "flag_clipped", "no_cut_check", "cut_marker"]

_T = TypeVar("_T")
_R = TypeVar("_R")
_S = TypeVar("_S")
_P = ParamSpec("_P")

TRUNCATED = "truncated"

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")
# `srun -l` ("0: ", " 12: "): only stripped when most lines carry it, so a pprint line `0: 'x',` survives.
_SRUN = re.compile(r"^\s{0,4}\d{1,5}: ")
# Labels that cannot be mistaken for content: `mpirun --tag-output` ("[1,0]<stdout>:", optionally after a
# --timestamp-output date), Ray actors ("(SGLangEngine pid=42, ip=10.0.0.1) "), `kubectl logs --prefix`.
_TAGGED = re.compile(r"^(?:(?:\w{3} \w{3} [ \d]\d [\d:]{8} \d{4})?\[\d+,\d+\]<std(?:out|err)>:"
                     r"|\((?:\w+(?:\.\w+)*(?: \w+)?) pid=\d+(?:, ip=[\d.]+)?\) "
                     r"|\[pod/[^\]\s]+\] )")
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
_STAMP = r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
# A logger that wrapped the program's own lines (a driver script's logging, docker -t, journald, vLLM-style):
# `2025-01-27 02:01:28,123 - __main__ - INFO - `, `2025-01-27 02:01:28 INFO name: `, `INFO:name:`,
# `2025-01-27T02:01:28.123Z `, `Dec 02 01:58:24 host python3[503]: `, `INFO 01-27 02:01:28 [x.py:12] `.
_WRAPPER = re.compile(
    rf"^(?:{_STAMP}\s+-\s+[\w.:<>-]+\s+-\s+{_LEVEL} - "
    rf"|{_STAMP}\s+\[?{_LEVEL}\]?\s+(?:[\w.]+:\s+)?(?=\[)"
    rf"|{_LEVEL}:[\w.]+:"
    rf"|\d{{4}}-\d{{2}}-\d{{2}}T\d{{2}}:\d{{2}}:\d{{2}}(?:\.\d+)?Z\s"
    rf"|[A-Z][a-z]{{2}} [ \d]\d \d{{2}}:\d{{2}}:\d{{2}} [\w.-]+ [\w./-]+(?:\[\d+\])?: "
    rf"|{_LEVEL} \d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}(?:\.\d+)? (?:\[[\w./:-]+\] )?)")


def strip_ansi(text: str) -> str:
    """Remove terminal colour/cursor escapes; CRLF and lone CR (tqdm redraws) become line breaks."""
    return ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")


def strip_rank_prefix(line: str) -> str:
    """One line without a launcher's label (srun, mpirun, Ray actor, kubectl)."""
    return _TAGGED.sub("", _SRUN.sub("", line, count=1), count=1)


def strip_decoration(line: str, srun: bool = True) -> str:
    """One line without the labels and wrapping loggers' prefixes stacked before the program's own text."""
    for _ in range(4):
        before = line
        if srun:
            line = _SRUN.sub("", line, count=1)
        line = _TAGGED.sub("", line, count=1)
        line = _WRAPPER.sub("", line, count=1)
        if line == before:
            break
    return line


def clean_lines(text: str) -> list[str]:
    """The text's lines with every decoration removed (the one clean-up all parsers share)."""
    lines = strip_ansi(text).split("\n")
    filled = [ln for ln in lines if ln.strip()]
    srun = bool(filled) and sum(1 for ln in filled if _SRUN.match(ln)) * 2 > len(filled)
    return [strip_decoration(ln, srun=srun) for ln in lines]


def clean_text(text: str) -> str:
    """The whole text with every decoration removed, line breaks kept (for JSON bodies and git -z records)."""
    return "\n".join(clean_lines(text))


def cut_marker(message: str, *markers: str) -> str | None:
    """The marker `message` is a proper beginning of ('Decode batc' of 'Decode batch'): a line of a kind the
    parser reads, cut before the part that names it; None when the message is whole or another kind."""
    msg = message.strip()
    if not msg:
        return None
    return next((m for m in markers if m.startswith(msg) and m != msg), None)


class ParsedList(list[_T]):
    """A line parser's list result that also says what it could not read (callers that want a list get one)."""

    problems: list[str]

    def __init__(self, items: Iterable[_T] = (), problems: list[str] | None = None) -> None:
        super().__init__(items)
        self.problems = list(problems or [])


CutCheck = Callable[[str, Any], Iterable[str]]


def flag_clipped(check: CutCheck) -> Callable[[Callable[Concatenate[_S, _P], _R]], Callable[Concatenate[_S, _P], _R]]:
    """Decorate a line parser with its format's own cut check: a list result becomes a ParsedList, and each reason
    `check(text, result)` gives (a row with fewer cells than its header, a record without its closing field) is
    added to the result's problems as 'truncated: <reason>'. No generic width guess: real text pads and repeats
    lines to one width, so only a break in the format's structure says a narrow terminal cut it."""

    def decorate(parse: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
        @functools.wraps(parse)
        def wrapper(text: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            result = parse(text, *args, **kwargs)
            if isinstance(result, list) and not isinstance(result, ParsedList):
                result = ParsedList(result)  # type: ignore[assignment]
            problems = getattr(result, "problems", None)
            if isinstance(text, str) and isinstance(problems, list):
                for reason in check(text, result):
                    if not any(p.startswith(TRUNCATED) and reason in p for p in problems):
                        problems.append(f"{TRUNCATED}: {reason}")
            return result

        return wrapper

    return decorate


def no_cut_check(text: str, result: Any) -> Iterable[str]:
    """For formats whose parser reports its own cuts (or whose records cannot be told cut): no extra reasons."""
    return ()
