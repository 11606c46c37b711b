"""redact_text runs in linear time on long word runs, and the faster patterns match exactly what the old ones did."""

from __future__ import annotations

import re
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdoctor.host import redact
from specdoctor.host.redact import redact_text

# The patterns as they were before the guards (quadratic on a long run of letters), kept here as the reference.
_OLD_URL_CRED = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:/@\s]+):(?P<pw>[^@/\s]+)@")
_OLD_QUOTED = re.compile(r"""(?P<lead>(?P<q0>["']?)(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P=q0)\s*(?::|=|=>)\s*)"""
                         r"""(?P<q>["'])(?P<value>(?:\\.|(?!(?P=q)).)*)(?P=q)""")

# Short pieces that build URLs, assignments, quoted values and the characters either side of a name.
_PIECES = ["a", "Z", "_", "1", ".", "-", "+", ":", "//", "://", "@", "=", "=>", " ", "\t", "'", '"', "\\", "\n",
           "api_key", "token", "https", "git+ssh", "user", "pw", "x9", "é", "/", "\x00"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[tuple[int, int], dict[str, str | None]]]:
    return [(m.span(), m.groupdict()) for m in pattern.finditer(text)]


@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(text=_TEXT)
def test_the_guarded_patterns_find_the_same_matches_as_the_old_ones(text: str) -> None:
    assert _spans(redact._URL_CRED, text) == _spans(_OLD_URL_CRED, text)
    assert _spans(redact._QUOTED, text) == _spans(_OLD_QUOTED, text)


def test_known_shapes_still_match_where_the_guard_could_have_bitten() -> None:
    # a name after a digit, a dot or a quote; a scheme after a digit; a repr inside a word run
    for text in ["1api_key='x'", "x.api_key='v'", "'token': 'abc'", "9https://u:p@h", "ServerArgs(api_key='s3')"]:
        assert _spans(redact._QUOTED, text) == _spans(_OLD_QUOTED, text)
        assert _spans(redact._URL_CRED, text) == _spans(_OLD_URL_CRED, text)
    assert redact_text("9https://u:hunter2@h") == f"9https://u:{redact.REDACTED}@h"
    assert "s3cret" not in redact_text("ServerArgs(api_key='s3cret', port=1)")


def test_a_long_hostile_argument_is_redacted_in_well_under_a_second() -> None:
    # took 13-25 s before the guards (one quadratic scan per letter of the run), tens of ms after
    for text in ["a;touch /tmp/c" + "x" * 20000, "a $(touch${IFS}/tmp/c)" + "x" * 20000, "q" * 30000 + "://u:pw@h"]:
        t0 = time.perf_counter()
        redact_text(text)
        assert time.perf_counter() - t0 < 2.0


_SECRETISH = _PIECES + ["password", "PaSsWd", "secret", "pwd", "Authorization", "proxy-authorization", "Bearer ",
                        "Basic ", "Token ", "--api-key", "--hf-token=", "hf_abcdefgh123", "sk-abcdefgh12",
                        "AKIAABCDEFGHIJKLMNOP", "x", "Q9", "***REDACTED***", ",", ";", "}", "is "]


@settings(max_examples=200, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(text=st.lists(st.sampled_from(_SECRETISH), max_size=30).map("".join))
def test_skipping_steps_that_cannot_match_changes_no_redaction(text: str) -> None:
    assert redact._redact(text) == redact._redact(text, guarded=False)
    assert redact_text(text) == redact._redact(text, guarded=False)


def test_a_remembered_redaction_is_redone_once_a_new_secret_is_known() -> None:
    text = "the value is qzv81-unique-zz in this line"
    assert redact_text(text) == text
    redact.remember_secret("qzv81-unique-zz")
    assert redact_text(text) == f"the value is {redact.REDACTED} in this line"


# One text per step that its pattern matches (case variants included), and the secret-corpus shapes.
_EACH_STEP = ["hf_abcdefgh123 and sk-abcdefgh12", "ServerArgs(api_key='s3cr3t')", '{"Token": "x"}', "HF_TOKEN=abc",
              "api_key: abc123", "password = hunter2", "git clone https://u:pw@h/r", "--api-key 'x y'",
              "--hf-token=abc", "AUTHORIZATION: Basic abcdefgh", "proxy-authorization=xyz", "Bearer abcdefgh123",
              "Token abcdefgh123", "my PWD x9", "PassPhrase: Abc-1", "the SECRET is q1w2e3", "passwd\tz_9"]


def test_a_step_is_skipped_only_where_its_pattern_finds_nothing() -> None:
    for text in _EACH_STEP:
        for pattern, _repl, may_match in redact._STEPS:
            if pattern.search(text):
                assert may_match(text), (pattern.pattern[:40], text)
        assert redact._redact(text) == redact._redact(text, guarded=False)
    matched = {i for i, (p, _r, _m) in enumerate(redact._STEPS) for t in _EACH_STEP if p.search(t)}
    assert matched == set(range(len(redact._STEPS)))  # every step is exercised by some text above
