"""Issue #33: one test per kind of variation that broke round 2's parsers, on the text that showed it."""

from __future__ import annotations

import json

import pytest

from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.git import parse_diff_stat, parse_numstat_z
from specdoctor.parsers.sglang import (
    normalise_meta_info,
    parse_body,
    parse_decode_lines,
    parse_launch_command,
)
from specdoctor.parsers.sglang_bench import parse_eagle_bench_lines
from specdoctor.parsers.sglang_startup import parse_startup
from specdoctor.parsers.text import clean_lines

from .cases import SYNTH_ENV_STARTUP, fixture_text

SPEC_LOG = "samples/sglang-logs/v0.5.17-2026-12-h200-eagle3-spec-server-log-EXCERPT.txt"


def test_wrapping_logger_and_launcher_labels_before_sglangs_prefix():
    t = parse_startup(SYNTH_ENV_STARTUP)  # SYNTHETIC: the documented prefixes of logging, srun and mpirun
    assert t.models_loaded == ["LlamaForCausalLM"] and t.loads_s == [0.16]
    assert t.cuda_graphs == {"target": 4.27, "draft": 1.5} and t.ready_at is not None and not t.problems


@pytest.mark.parametrize("line,rest", [
    ("2025-01-27 02:01:28,123 - __main__ - INFO - [2025-01-27 02:01:28 TP0] Load weight begin.",
     "[2025-01-27 02:01:28 TP0] Load weight begin."),
    ("0: [1,0]<stdout>:[2025-01-27 02:01:28 TP0] x", "[2025-01-27 02:01:28 TP0] x"),
    ("(SGLangEngine pid=4242, ip=10.0.0.1) [2025-01-27 02:01:28 TP0] x", "[2025-01-27 02:01:28 TP0] x"),
    ("2025-01-27T02:01:28.123456Z [2025-01-27 02:01:28] x", "[2025-01-27 02:01:28] x"),
    ("INFO:root:{\"a\": 1}", "{\"a\": 1}"),
])
def test_one_clean_up_removes_stacked_prefixes(line, rest):
    assert clean_lines(line) == [rest]


def test_a_literal_line_starting_with_a_number_is_not_taken_for_an_srun_label():
    # srun labels are stripped only when most lines carry one (a label on every line is what srun -l writes)
    assert clean_lines("{\n 0: 'a',\n 'b': 1,\n 'c': 2}")[1] == " 0: 'a',"


def test_one_bad_number_is_a_problem_not_an_abort():
    log = fixture_text(SPEC_LOG).replace("elapsed=4.04 s", "elapsed=4.0.4 s", 1)
    t = parse_startup(log)
    assert t.ready_at is not None and "target verify" not in t.cuda_graphs and len(t.problems) == 1
    assert t.cuda_graphs["draft extend"] == 1.16


def test_every_0517_graph_capture_counts():
    t = parse_startup(fixture_text(SPEC_LOG))
    assert t.cuda_graphs == {"target prefill": 44.32, "target verify": 4.04, "draft prefill": 1.52,
                             "draft decode": 5.77, "draft extend": 1.16}
    assert t.cuda_graph_s == pytest.approx(56.81) and t.engine_timings["cuda_graph.draft_extend"] == 1.16
    assert t.models_loaded == ["LlamaForCausalLM", "LlamaForCausalLMEagle3"] and t.load_weight_s == 0.17


def test_a_failed_0517_start_up_has_no_ready_time_and_no_extend_graph():
    t = parse_startup(fixture_text("samples/sglang-logs/v0.5.17-2026-12-h200-eagle3-deep-gemm-fail-server-log-EXCERPT.txt"))
    assert t.ready_at is None and "draft extend" not in t.cuda_graphs and t.cuda_graphs["draft decode"] == 4.77


def test_0517_decode_lines_and_meta_info():
    lines = parse_decode_lines(fixture_text(SPEC_LOG))
    assert len(lines) == 16 and lines[0].accept_len == 3.0 and lines[0].accept_rate == 0.67 and lines[0].graph
    body = parse_body(fixture_text("samples/sglang-json/generate-0.5.17-2026-12-h200-spec-request-reply-list.txt"))
    meta = normalise_meta_info(body[0]["reply"]["json"]["meta_info"])
    assert meta.spec_verify_ct is not None and meta.spec_accept_length is not None and meta.completion_tokens == 16


def test_bench_label_skips_a_markdown_fence():
    text = ("EAGLE-3:\n```\n#questions: 80, Throughput: 276.3 token/s, Acceptance length: 5.36\n```\n\n"
            "EAGLE-2\n```text\n#questions: 80, Throughput: 224.7 token/s, Acceptance length: 3.75\n```\n")
    assert [x.label for x in parse_eagle_bench_lines(text)] == ["EAGLE-3", "EAGLE-2"]


@pytest.mark.parametrize("decorate", [lambda t: "\x1b[32m" + t + "\x1b[0m", lambda t: t.replace("\n", "\r\n"),
                                      lambda t: "".join("0: " + ln for ln in t.splitlines(True))])
def test_json_and_z_records_accept_what_line_parsers_accept(decorate):
    body = json.dumps({"meta_info": {"completion_tokens": 3}}, indent=1)
    assert parse_body(decorate(body)) == {"meta_info": {"completion_tokens": 3}}
    assert [r.path for r in parse_numstat_z(decorate("1\t2\ta.py\x00"))] == ["a.py"]


def test_structured_parsers_raise_parse_error_with_one_line():
    with pytest.raises(ParseError) as err:
        parse_body("{\n  'a': \n")
    assert "\n" not in str(err.value)


def test_clipped_stat_rename_says_truncated():
    text = fixture_text("samples/git-diff-stat/ci-refactor-binary-rename-pr13448.txt")
    cut = "\n".join(ln[:30] for ln in text.splitlines())
    assert any("truncated" in p for p in parse_diff_stat(cut).problems)
    assert not parse_diff_stat(text).problems


def test_pure_shell_expansions_are_evaluated_the_rest_flagged():
    a = parse_launch_command("N=4\npython -m sglang.launch_server --cuda-graph-bs $(seq 1 $N) --tp {1..1}")
    assert a.extra["cuda_graph_bs"] == [1, 2, 3, 4] and a.tp_size == 1 and not a.unresolved
    b = parse_launch_command("python -m sglang.launch_server --cuda-graph-bs $(nproc)")
    assert b.unresolved == {"cuda_graph_bs": "$(nproc)"} and "cuda_graph_bs" not in b.extra
