"""Every parser under hypothesis: random text, real samples cut/CRLF'd/coloured/rank-prefixed/salted with junk.

The only exception a parser may raise is its documented ParseError; every pydantic result must re-validate
(no string left in an int field by an attribute assignment). Examples per parser: SPECDOCTOR_FUZZ_EXAMPLES
(default 25, the 'parsers-ci' profile) so the suite stays well under a minute in CI.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from specdoctor.parsers import (
    environ,
    git,
    nccl,
    nvidia_smi,
    nvidia_smi_table,
    sglang,
    sglang_bench,
    sglang_check_env,
    sglang_server_args,
)
from specdoctor.parsers.errors import ParseError

settings.register_profile("parsers-ci", max_examples=int(os.environ.get("SPECDOCTOR_FUZZ_EXAMPLES", "25")),
                          deadline=None, database=None, derandomize=False,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings.get_profile("parsers-ci")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SAMPLES = sorted(p.read_text(encoding="utf-8", errors="replace")[:20000]
                 for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".txt", ".csv", ".json", ".log"))

ANSI_CODES = ["\x1b[0m", "\x1b[1;31m", "\x1b[32m", "\x1b[2K", "\x1b]0;title\x07", "\x1b[?25l"]
PREFIXES = ["0: ", " 12: ", "[1,0]<stdout>:", "(SGLangEngine pid=4242) ", "node-1: ", "$ "]


@st.composite
def real_shaped_text(draw: st.DrawFn) -> str:
    """A real sample or random text, then any of: lines cut or dropped, CRLF, ANSI, rank prefixes, junk."""
    if draw(st.integers(0, 4)) == 0:
        text = draw(st.text(max_size=400))
    else:
        text = draw(st.sampled_from(SAMPLES))
    lines = text.split("\n")
    if draw(st.booleans()):  # cut a window of lines, and cut the first/last line mid-way
        a = draw(st.integers(0, len(lines)))
        b = draw(st.integers(a, len(lines)))
        lines = lines[a:b] or [""]
        lines[0] = lines[0][draw(st.integers(0, len(lines[0]))):]
        lines[-1] = lines[-1][:draw(st.integers(0, len(lines[-1])))]
    if draw(st.booleans()):  # drop random lines
        keep = draw(st.lists(st.booleans(), min_size=len(lines), max_size=len(lines)))
        lines = [ln for ln, k in zip(lines, keep, strict=True) if k] or [""]
    if draw(st.booleans()):
        pre = draw(st.sampled_from(PREFIXES))
        lines = [pre + ln for ln in lines]
    if draw(st.booleans()):
        code = draw(st.sampled_from(ANSI_CODES))
        lines = [ln.replace(" ", code + " ", 1) for ln in lines]
    if draw(st.booleans()) and lines:  # salt with junk: binary bytes, unicode, separators
        junk = draw(st.one_of(st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
                              st.text(alphabet=st.sampled_from("|:=,{}[]()$`'\"\\\x00\t-#%…"), max_size=20)))
        at = draw(st.integers(0, len(lines) - 1))
        lines[at] = lines[at][:len(lines[at]) // 2] + junk + lines[at][len(lines[at]) // 2:]
    sep = "\r\n" if draw(st.booleans()) else "\n"
    return sep.join(lines)


def _check_result(result: Any) -> None:
    """Pydantic results must still validate: a value assigned past validation would show up here."""
    items = result if isinstance(result, (list, tuple)) else [result]
    for item in items:
        if isinstance(item, BaseModel):
            type(item).model_validate(item.model_dump())


TEXT_PARSERS: list[tuple[str, Callable[[str], Any], tuple[type[BaseException], ...]]] = [
    ("nvidia_smi.parse_list", nvidia_smi.parse_list, ()),
    ("nvidia_smi.parse_query_csv", lambda t: nvidia_smi.parse_query_csv(t, ["index", "name", "clocks.sm"]), ()),
    ("nvidia_smi.parse_q", nvidia_smi.parse_q, ()),
    ("nvidia_smi.parse_topo", nvidia_smi.parse_topo, ()),
    ("nvidia_smi_table.parse_smi_table", nvidia_smi_table.parse_smi_table, ()),
    ("nccl.parse_nccl_tests", nccl.parse_nccl_tests, ()),
    ("nccl.parse_nccl_tests_json", nccl.parse_nccl_tests_json, (ParseError,)),
    ("nccl.parse_all_reduce", nccl.parse_all_reduce, (ParseError,)),
    ("nccl.parse_nccl_debug", nccl.parse_nccl_debug, ()),
    ("sglang.split_command", sglang.split_command, (ParseError,)),
    ("sglang.parse_launch_command", sglang.parse_launch_command, (ParseError,)),
    ("sglang.drop_speculative_flags", sglang.drop_speculative_flags, (ParseError,)),
    ("sglang.parse_decode_lines", sglang.parse_decode_lines, ()),
    ("sglang.parse_body", sglang.parse_body, (ParseError,)),
    ("sglang_bench.parse_bench_serving", sglang_bench.parse_bench_serving, ()),
    ("sglang_bench.parse_bench_serving_jsonl", sglang_bench.parse_bench_serving_jsonl, ()),
    ("sglang_bench.parse_bench_one_batch_server", sglang_bench.parse_bench_one_batch_server, ()),
    ("sglang_bench.parse_send_one", sglang_bench.parse_send_one, (ParseError,)),
    ("sglang_bench.parse_eagle_bench_lines", sglang_bench.parse_eagle_bench_lines, ()),
    ("sglang_server_args.parse_server_args", sglang_server_args.parse_server_args, (ParseError,)),
    ("sglang_check_env.parse_check_env", sglang_check_env.parse_check_env, (ParseError,)),
    ("environ.parse_environ_py", environ.parse_environ_py, (ParseError,)),
    ("environ.find_gate_reads", environ.find_gate_reads, ()),
    ("git.parse_numstat_z", git.parse_numstat_z, (ParseError,)),
    ("git.parse_numstat_z(NUL)", lambda t: git.parse_numstat_z(t.replace("\n", "\x00")), (ParseError,)),
    ("git.parse_name_status_z", lambda t: git.parse_name_status_z(t.replace("\n", "\x00")), ()),
    ("git.parse_stash_list", git.parse_stash_list, ()),
    ("git.parse_submodule_status", git.parse_submodule_status, ()),
    ("git.parse_diff_stat", git.parse_diff_stat, ()),
    ("git.unquote_c_path", git.unquote_c_path, ()),
    ("git.logging_only", lambda t: git.logging_only(t.splitlines()), ()),
    ("git.ambiguous_lines", lambda t: git.ambiguous_lines(t, len(t) % 3), ()),
    ("git.select_hunks", lambda t: git.select_hunks(t, [0]), (ParseError,)),
    ("git.parse_backup_refs", lambda t: git.parse_backup_refs(t.replace("\n", git.REF_MARKER, 3),
                                                              "refs/specdoctor/backups/",
                                                              "refs/specdoctor/restored/"), ()),
]


@pytest.mark.parametrize("name,parse,allowed", TEXT_PARSERS, ids=[p[0] for p in TEXT_PARSERS])
def test_text_parsers_raise_only_their_documented_error(name, parse, allowed):
    @PROFILE
    @given(real_shaped_text())
    def run(text: str) -> None:
        try:
            result = parse(text)
        except allowed:
            return
        _check_result(result)

    run()


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                max_size=5), max_leaves=20)
KEYS = st.sampled_from(["port", "tp_size", "version", "model_path", "speculative_num_steps", "internal_states",
                        "decode", "cuda_graph_max_bs", "completion_tokens", "e2e_latency", "finish_reason",
                        "spec_verify_ct", "avg_spec_accept_length", "disable_cuda_graph"])
BODIES = st.one_of(JSON, st.dictionaries(KEYS, JSON, max_size=8),
                   st.dictionaries(st.just("internal_states"), st.lists(st.dictionaries(KEYS, JSON, max_size=4))))


@PROFILE
@given(BODIES)
def test_body_normalisers_raise_only_body_error(data):
    for fn in (sglang.normalise_server_info, sglang.normalise_meta_info):
        try:
            _check_result(fn(data))
        except sglang.BodyError:
            pass


@PROFILE
@given(st.text(max_size=30), st.one_of(st.none(), st.text(max_size=10)))
def test_gate_values_never_raise(value, default):
    assert isinstance(environ.is_enabled_value(value, default), bool)
