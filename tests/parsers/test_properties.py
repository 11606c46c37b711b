"""Issue #33's properties, for every public `parse_*` function found by introspection (cases.py registers each):

1. any text gives a result or ParseError (with a one-line reason), never another exception;
2. a valid sample decorated the ways real captures are (colour, CRLF, a launcher's rank label, a wrapping
   logger's prefix, a narrow terminal's clip at column N) reads to the same critical fields as the plain sample,
   or, for the clip, says 'truncated' in its problems.

Examples come from the 'parsers' hypothesis profile (60 a test, no deadline; HYPOTHESIS_PROFILE overrides).
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import specdoctor.parsers
from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.text import ANSI

from .cases import CASES, Case, problems_of

settings.register_profile("parsers", max_examples=60, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("parsers-quick", max_examples=10, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "parsers"))
BY_NAME = {c.name: c for c in CASES}


def discovered_parsers() -> list[str]:
    """Every public `parse_*` function defined in a specdoctor.parsers module, as 'module.function'."""
    found = []
    for info in pkgutil.iter_modules(specdoctor.parsers.__path__):
        module = importlib.import_module(f"specdoctor.parsers.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("parse_") and fn.__module__ == module.__name__:
                found.append(f"{info.name}.{name}")
    return sorted(found)


def test_every_discovered_parser_has_a_property_case():
    found = discovered_parsers()
    assert len(found) >= 20, found
    missing = [n for n in found if n not in BY_NAME]
    assert not missing, f"parsers without a case in tests/parsers/cases.py: {missing}"
    stale = [n for n in BY_NAME if n not in found]
    assert not stale, f"cases for parsers that no longer exist: {stale}"


def test_every_case_has_a_sample_its_parser_reads():
    for case in CASES:
        texts = case.texts()
        assert texts, case.name
        for text in texts:
            assert case.critical(case.parse(text)) not in (None, [], {}, ()), case.name


# -- property 1: any text -> a result or ParseError ---------------------------------------------------------

@st.composite
def any_text(draw: st.DrawFn, case: Case) -> str:
    """Random text, or a window of one of the case's samples with junk spliced in (at most 3,000 characters)."""
    if draw(st.booleans()):
        return draw(st.text(max_size=300))
    text = draw(st.sampled_from(case.texts()))
    a = draw(st.integers(0, len(text)))
    b = draw(st.integers(a, min(len(text), a + 3000)))
    junk = draw(st.text(alphabet=st.sampled_from("0123456789.,:=|{}[]()$`'\"\\\x00\t\r\n-#%e+ \x1b"), max_size=12))
    at = draw(st.integers(0, b - a))
    piece = text[a:b]
    return piece[:at] + junk + piece[at:]


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_any_text_gives_a_result_or_parse_error(name):
    case = BY_NAME[name]

    @PROFILE
    @given(any_text(case))
    def run(text: str) -> None:
        try:
            case.parse(text)
        except ParseError as exc:
            assert "\n" not in str(exc), f"ParseError reason is not one line: {str(exc)!r}"

    run()


# -- property 2: decorations keep the critical fields ----------------------------------------------------------

LABELS = ["0: ", " 12: ", "[1,0]<stdout>:", "(SGLangEngine pid=4242) "]
WRAPPERS = ["2026-12-02 01:58:49,101 - __main__ - INFO - ", "2026-12-02T01:58:49.123456789Z ", "INFO:root:"]


def colour(text: str) -> str:
    """What `script` or a colouring pager leaves: SGR codes around numbers and some words."""
    parts = ANSI.split(text)  # leave escapes the sample already has alone
    codes = ANSI.findall(text) + [""]
    return "".join(re.sub(r"(\d+(?:\.\d+)?|INFO|TP0|GPU)", "\x1b[1;32m\\1\x1b[0m", part) + code
                   for part, code in zip(parts, codes, strict=True))


def per_line(text: str, prefix: str) -> str:
    return "".join(prefix + ln for ln in text.splitlines(keepends=True))


def clip(text: str, width: int) -> str:
    return "".join(ln.rstrip("\n")[:width] + ("\n" if ln.endswith("\n") else "") for ln in text.splitlines(True))


def decorate(plain: str, kind: str, pick: int) -> str:
    """The sample as a capture of that kind shows it (`pick` chooses the label, prefix or clip column)."""
    if kind == "colour":
        return colour(plain)
    if kind == "crlf":
        return plain.replace("\n", "\r\n")
    if kind == "label":
        return per_line(plain, LABELS[pick % len(LABELS)])
    if kind == "wrapper":
        return per_line(plain, WRAPPERS[pick % len(WRAPPERS)])
    cut = clip_columns(plain)
    return clip(plain, cut[pick % len(cut)])


def clip_columns(plain: str) -> list[int]:
    """Terminal widths that cut at least two lines (fewer is not told apart from one long last line)."""
    lines = plain.splitlines()
    return [w for w in sorted({len(ln) for ln in lines if ln.strip()})[:-1]
            if w >= 20 and sum(1 for ln in lines if len(ln) > w) >= 2]


@st.composite
def decorated(draw: st.DrawFn, case: Case) -> tuple[str, int, int]:
    """(kind, sample index, pick): small values, so a failure's report stays short."""
    index = draw(st.integers(0, len(case.texts()) - 1))
    clippable = case.line_oriented and clip_columns(case.texts()[index])
    kind = draw(st.sampled_from(["colour", "crlf", "label", "wrapper"] + (["clip"] if clippable else [])))
    return kind, index, draw(st.integers(0, 10_000))


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_decorated_sample_keeps_critical_fields(name):
    case = BY_NAME[name]
    texts = case.texts()

    @PROFILE
    @given(decorated(case))
    def run(sample: tuple[str, int, int]) -> None:
        kind, index, pick = sample
        plain = texts[index]
        text = decorate(plain, kind, pick)
        want = case.critical(case.parse(plain))
        try:
            result: Any = case.parse(text)
        except ParseError as exc:
            assert kind == "clip", f"{kind}: refused a decorated sample: {exc}"
            return
        if case.critical(result) == want:
            return
        assert kind == "clip", f"{kind} changed the critical fields"
        assert any("truncated" in p for p in problems_of(result)), "clipped text read differently, not flagged"

    run()
