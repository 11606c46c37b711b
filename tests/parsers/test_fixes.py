"""Each fix of issue #22 on a real sample of its shape, plus the case where the rule must not fire.

Inputs marked SYNTHETIC are derived from a real sample by a stated transformation (colour codes added, a
terminal's clipping simulated, a rank label prepended); they are not counted as real samples.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specdoctor.errors import UsageError
from specdoctor.parsers.environ import parse_environ_py
from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.git import parse_diff_stat, parse_numstat_z, select_hunks
from specdoctor.parsers.nccl import parse_all_reduce, parse_nccl_debug, parse_nccl_tests_json
from specdoctor.parsers.nvidia_smi import parse_list, parse_q, parse_query_csv, parse_topo
from specdoctor.parsers.nvidia_smi_table import parse_smi_table
from specdoctor.parsers.sglang import (
    BodyError,
    LaunchParseError,
    normalise_meta_info,
    normalise_server_info,
    parse_body,
    parse_decode_lines,
    parse_launch_command,
    split_command,
)
from specdoctor.parsers.sglang_bench import (
    parse_bench_serving,
    parse_bench_serving_jsonl,
    parse_eagle_bench_lines,
    parse_send_one,
)
from specdoctor.parsers.sglang_server_args import parse_server_args

from .helpers import real

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def sample(rel: str) -> str:
    """A copied reference sample (tests/fixtures/samples) without its header lines."""
    return "".join(ln for ln in (FIX / "samples" / rel).read_text(encoding="utf-8").splitlines(keepends=True)
                   if not ln.startswith("# "))


def colour(text: str) -> str:
    """SYNTHETIC: what `script`/a colouring pager leaves: SGR codes around numbers and words."""
    return re.sub(r"(\d+(?:\.\d+)?|NCCL|INFO|TP0)", "\x1b[1;32m\\1\x1b[0m", text)


# -- git ------------------------------------------------------------------------------------------------

def test_numstat_on_stat_text_is_a_parse_error_with_a_hint():
    stat = sample("git-diff-stat/spec-metrics-pr11441.txt")
    with pytest.raises(ParseError, match="git diff --stat"):
        parse_numstat_z(stat)
    assert parse_numstat_z("3\t1\ta.py\x00-\t-\timg.png\x00")[1].binary  # the real -z form still parses


@pytest.mark.parametrize("rel,files,ins,dels", [
    ("spec-metrics-pr11441.txt", 9, 70, 1),
    ("ci-refactor-binary-rename-pr13448.txt", 29, 22, 52),
    ("speculative-dir-october-2025-range.txt", 16, 2605, 864),
])
def test_diff_stat_reference_samples(rel, files, ins, dels):
    d = parse_diff_stat(sample(f"git-diff-stat/{rel}"))
    assert (len(d.files), d.files_changed, d.insertions, d.deletions) == (files, files, ins, dels) and d.consistent


def test_diff_stat_renames_binaries_and_abbreviations():
    d = parse_diff_stat(sample("git-diff-stat/ci-refactor-binary-rename-pr13448.txt"))
    img = next(f for f in d.files if f.binary)
    assert img.rename_to == "examples/assets/example_image.png" and img.changes is None
    m = parse_diff_stat(sample("git-diff-stat/spec-metrics-pr11441.txt"))
    tok = next(f for f in m.files if f.path == "python/sglang/srt/managers/tokenizer_manager.py")
    assert (tok.changes, tok.plus, tok.minus, tok.abbreviated) == (30, 22, 0, False)  # the graph is scaled
    assert sum(f.abbreviated for f in m.files) == 3


def test_diff_stat_real_binary_sizes_colour_and_narrow_width():
    new = parse_diff_stat(real("git-diff-stat/docs-site-new-markdown-and-binary-images.txt"))
    assert [(f.bytes_before, f.bytes_after) for f in new.files if f.binary] == [(0, 41646), (0, 332782)]
    assert (new.files_changed, new.insertions, new.deletions) == (9, 6047, 0)
    ansi = parse_diff_stat(real("git-diff-stat/docs-site-color-always-ansi-graph.txt"))
    assert (len(ansi.files), ansi.insertions, ansi.deletions) == (38, 3605, 2466)
    vlm = next(f for f in ansi.files if f.path == "advanced_features/vlm_query.ipynb")
    assert (vlm.changes, vlm.plus, vlm.minus) == (469, 4, 5)
    narrow = parse_diff_stat(real("git-diff-stat/docs-site-stat-width-60.txt"))
    assert len(narrow.files) == 37 and next(f for f in narrow.files if f.path.endswith("vlm_query.ipynb")).minus == 3


def test_diff_stat_does_not_read_other_pipes():
    # a markdown table and an nvidia-smi row have '|' but are not stat lines
    assert parse_diff_stat("| a | b |\n|---|---|\n| 1 | 2 |\n").files == []
    assert parse_diff_stat(real("nvidia-smi-table/nvitop-issue152-processes-clipped-names-gi-ci-na.txt")).files == []


def test_select_hunks_on_junk_is_a_parse_error():
    with pytest.raises(ParseError):
        select_hunks("@@ -1 +1 @@\n-a\n+b\n@@ broken", [0])


# -- environ.py ----------------------------------------------------------------------------------------

def test_environ_syntax_error_is_a_parse_error():
    with pytest.raises(ParseError, match="not valid Python"):
        parse_environ_py("class Envs:\n    X = EnvBool(\n")
    with pytest.raises(ParseError):
        parse_environ_py("a = 1\x00")
    assert parse_environ_py("class Envs:\n    X = EnvBool(False)\n").get("X") is not None


# -- NCCL ----------------------------------------------------------------------------------------------

def test_nccl_rank_label_is_not_the_host():
    log = parse_nccl_debug("[1,0]<stdout>:gpu-a:11:11 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                           "(SGLangEngine pid=9) gpu-b:12:13 [1] NCCL INFO NCCL_PROTO set by environment to LL\n")
    assert [ln.host for ln in log.lines] == ["gpu-a", "gpu-b"] and log.version == "2.21.5+cuda12.4"


def test_bare_version_needs_the_whole_line():
    assert parse_nccl_debug("we moved to NCCL version 2.18.1 last week\n").version is None
    assert parse_nccl_debug("INFO 01-29 pynccl.py:69] vLLM is using nccl==2.21.5\n").version is None


def test_ansi_in_nccl_logs_and_tables():
    text = colour(real("nccl_debug/nccl-issue952-cluster-name-placeholder-host-EXCERPT.txt"))  # SYNTHETIC
    log = parse_nccl_debug(text)
    assert len(log.lines) == 18 and log.cuda_driver == 12010
    table = (FIX / "nccl" / "a3mega-2x8-h100-mpirun-16ranks.txt").read_text()
    plain, coloured = parse_all_reduce(table), parse_all_reduce(colour(table))  # SYNTHETIC
    assert [r.model_dump() for r in coloured.rows] == [r.model_dump() for r in plain.rows] and plain.rows
    assert coloured.avg_busbw == plain.avg_busbw


def test_nccl_tests_json_errors_are_parse_errors():
    for bad in ("{", "[]", '{"results": [{"size": "big"}]}'):
        with pytest.raises(ParseError):
            parse_nccl_tests_json(bad)
    with pytest.raises(ParseError):
        parse_all_reduce("no table here")


# -- nvidia-smi ----------------------------------------------------------------------------------------

def test_srun_label_prefix_on_query_csv_list_q_and_table():
    csv = (FIX / "h200" / "nvidia-smi-query.csv").read_text()
    fields = ["index", "name", "uuid", "pci.bus_id", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem",
              "power.limit", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
              "pcie.link.width.max", "persistence_mode", "memory.total"]
    labelled = "".join(f"0: {ln}" for ln in csv.splitlines(keepends=True))  # SYNTHETIC: `srun -l` output
    rows = parse_query_csv(labelled, fields)
    assert rows == parse_query_csv(csv, fields) and len(rows) == 1 and rows[0]["name"] == "NVIDIA H200"
    assert parse_query_csv("0, NVIDIA H200, 1980\n", ["index", "name", "clocks.sm"])[0]["index"] == "0"
    lst = "".join(f" 3: {ln}" for ln in (FIX / "h200" / "nvidia-smi-L.txt").read_text().splitlines(True))
    assert [g.name for g in parse_list(lst)] == ["NVIDIA H200"]
    q = "".join(f"0: {ln}" for ln in (FIX / "h200" / "nvidia-smi-q.txt").read_text().splitlines(True))
    assert parse_q(q).gpus[0].power_limit_w == 700.0
    table = real("nvidia-smi-table/rlinf-issue255-2x-rtx4090-550.163.01-EXCERPT.txt")
    t = parse_smi_table("".join(f"1: {ln}" for ln in colour(table).splitlines(True)))  # SYNTHETIC
    assert [g.memory_used_mib for g in t.gpus] == [507, 459] and t.driver == "550.163.01"


def _clip(text: str, width: int) -> str:
    return "\n".join(ln.expandtabs(8)[:width] for ln in text.splitlines())


def test_topo_from_a_narrow_terminal_keeps_nic_rows_and_flags_truncation():
    full = real("check_env/pr965-8x-a100-nv12-4nic-prompt-EXCERPT.txt")
    t = parse_topo(full)
    assert not t.truncated and not t.problems  # must not fire on the whole matrix
    clipped = parse_topo(_clip(full, 98))  # SYNTHETIC: a 98-column terminal cuts the header inside 'NIC3'
    assert clipped.truncated and "NI" in clipped.problems[0]
    assert clipped.links["GPU0"]["GPU7"] == "NV12" and clipped.links["GPU1"]["NIC2"] == "SYS"
    assert "NIC3" not in clipped.links["GPU0"] and not clipped.cpu_affinity  # nothing invented for cut columns


def test_topo_clipped_cpu_affinity_is_not_accepted():
    text = real("check_env/issue2805-1x-a40-6nic-pydantic-warning-EXCERPT.txt").replace("0-31,64-95", "-31,64-95")
    t = parse_topo(text)  # SYNTHETIC: the field's first characters cut off, as a scrolled pane shows it
    assert t.cpu_affinity["GPU0"] is None and t.truncated and "-31,64-95" in t.problems[0]
    assert parse_topo(real("check_env/issue2805-1x-a40-6nic-pydantic-warning-EXCERPT.txt")).cpu_affinity[
        "GPU0"] == "0-31,64-95"


def test_topo_nic_rows_beyond_a_clipped_header_are_named_from_the_rows():
    text = ("\tGPU0\tGPU1\tNIC0\tNI\n"
            "GPU0\t X \tNV18\tPIX\tSYS\t0-47\t0\t\tN/A\n"
            "GPU1\tNV18\t X \tSYS\tPIX\t0-47\t0\t\tN/A\n"
            "NIC0\tPIX\tSYS\t X \tSYS\n"
            "NIC1\tSYS\tPIX\tSYS\t X\n")  # SYNTHETIC: header cut inside the last column name
    t = parse_topo(text)
    assert t.devices == ["GPU0", "GPU1", "NIC0", "NIC1"] and t.truncated
    assert t.links["GPU1"]["NIC1"] == "PIX" and t.links["NIC1"] == {"GPU0": "SYS", "GPU1": "PIX", "NIC0": "SYS"}


def test_topo_nic_names_of_other_drivers_and_not_header_words():
    text = ("\tGPU0\tGPU1\tmlx5_bond_0\tbnxt_re0\tCPU Affinity\tNUMA Affinity\n"  # SYNTHETIC pre-NICn naming
            "GPU0\t X \tNV4\tPIX\tSYS\t0-15\t0\n"
            "GPU1\tNV4\t X \tSYS\tPIX\t16-31\t1\n"
            "mlx5_bond_0\tPIX\tSYS\t X \tSYS\n"
            "bnxt_re0\tSYS\tPIX\tSYS\t X\n\nLegend:\n  X    = Self\n")
    t = parse_topo(text)
    assert t.devices == ["GPU0", "GPU1", "mlx5_bond_0", "bnxt_re0"] and not t.truncated
    assert t.links["bnxt_re0"]["GPU1"] == "PIX" and t.cpu_affinity == {"GPU0": "0-15", "GPU1": "16-31"}


# -- SGLang logs -------------------------------------------------------------------------------------------

def test_decode_line_with_elided_values_and_colour():
    (ln,) = parse_decode_lines("[2025-01-01 10:00:00 TP0] Decode batch. #running-req: ..., #token: ..., "
                               "token usage: 0.5, gen throughput (token/s): 1e999, #queue-req: 0\n")
    assert (ln.running_req, ln.tokens, ln.token_usage, ln.gen_throughput, ln.queue_req) == (None, None, 0.5, None, 0)
    text = real("sglang_logs/issue11948-eagle3-decode-accept-rate-trailing-comma-EXCERPT.txt")
    assert [x.model_dump() for x in parse_decode_lines(colour(text))] == \
        [x.model_dump() for x in parse_decode_lines(text)]  # SYNTHETIC colour


def test_decode_prefix_brackets_do_not_become_the_time():
    (ln,) = parse_decode_lines("(SGLangEngine pid=7) [repeated 3x] [2026-01-01 01:02:03 DP1 TP3] Decode batch, "
                               "#running-req: 2, #token: 10, gen throughput (token/s): 5.0, #queue-req: 0\n")
    assert (ln.time, ln.rank, ln.running_req) == ("2026-01-01 01:02:03", "DP1 TP3", 2)


# -- launch lines --------------------------------------------------------------------------------------

def test_launch_script_resolves_what_it_can_and_never_puts_strings_in_int_fields():
    script = ("export MODEL=/m/llama\nTP=8\nexport PORT=${PORT:-31000}\n"
              "python -m sglang.launch_server --model-path $MODEL --tp $TP --port $PORT --dp $DP "
              "--speculative-draft-model-path ${DRAFT} --host $(hostname -i) --json-model-override-args '{\"a\":\"$x\"}'")
    a = parse_launch_command(script)
    assert (a.model_path, a.tp_size, a.port) == ("/m/llama", 8, 31000) and a.env == {"MODEL": "/m/llama",
                                                                                     "PORT": "31000"}
    assert a.unresolved == {"dp_size": "$DP", "speculative_draft_model_path": "${DRAFT}", "host": "$(hostname -i)"}
    assert a.host == "127.0.0.1" and a.speculative_draft_model_path is None and "dp_size" not in a.extra
    assert a.extra["json_model_override_args"] == '{"a":"$x"}'  # single-quoted: literal, not unresolved
    bad = parse_launch_command("python -m sglang.launch_server --port abc --tp 2.5 --mem-fraction-static nan")
    assert (bad.port, bad.tp_size) == (30000, 1) and set(bad.unresolved) == {"port", "tp_size", "mem_fraction_static"}
    assert type(bad).model_validate(bad.model_dump()) == bad


def test_launch_variable_from_a_command_substitution_stays_unresolved():
    a = parse_launch_command("export M=$(cd /x && pwd); MP=$(nproc)\npython -m sglang.launch_server --model-path $M "
                             "--tp $MP --port 31000")
    assert a.env == {} and a.port == 31000 and a.tp_size == 1
    assert a.unresolved == {"env.M": "$(cd /x && pwd)", "model_path": "$(cd /x && pwd)", "tp_size": "$(nproc)"}


def test_launch_plumbing_and_chained_commands():
    a = parse_launch_command("cd /srv && CUDA_VISIBLE_DEVICES=0,1 nohup python3 -m sglang.launch_server --tp 2 "
                             "--model-path /m > log.txt 2>&1 &")
    assert a.tp_size == 2 and a.env == {"CUDA_VISIBLE_DEVICES": "0,1"} and a.argv[-1] == "/m" and not a.problems
    b = parse_launch_command("python -m sglang.launch_server --model-path /m --port 31000 2>&1 | tee server.log")
    assert b.port == 31000 and "tee" not in b.argv


def test_launch_parse_error_is_both_parse_and_usage_error():
    with pytest.raises(ParseError):
        split_command("python -m sglang.launch_server --model-path '/m")
    with pytest.raises(UsageError):
        parse_launch_command('--model-path "/m')
    assert issubclass(LaunchParseError, ParseError) and issubclass(LaunchParseError, UsageError)


# -- bodies ----------------------------------------------------------------------------------------------

def test_body_with_a_leading_label():
    assert parse_body('result {"text": "a", "meta_info": {"completion_tokens": 3}}')["meta_info"] == {
        "completion_tokens": 3}
    assert parse_body("Response:\n{'x': None, 'y': [1, 2]}") == {"x": None, "y": [1, 2]}
    for ambiguous in ('result {"a": 1} and {"b": 2}', 'x = f({"a": 1})', '<html><body>{"a": 1}</body></html>',
                      '{"a": 1'):
        with pytest.raises(BodyError):
            parse_body(ambiguous)


def test_normalisers_raise_body_error_on_wrong_types():
    with pytest.raises(BodyError, match="port"):
        normalise_server_info({"port": "http", "tp_size": 1})
    with pytest.raises(BodyError, match="completion_tokens"):
        normalise_meta_info({"completion_tokens": "many"})
    assert isinstance(BodyError("x"), ParseError)


# -- bench, send_one, ServerArgs --------------------------------------------------------------------------

def test_bench_reference_samples_layouts():
    assert parse_bench_serving(sample("sglang-bench/v0.3.x-2024-10-vllm-style-layout-no-backend-line-EXCERPT.txt"))[
        0].layout == "vllm"
    old = parse_bench_serving(sample("sglang-bench/v0.2-2024-08-h100-random-3000-oldest-layout.txt"))[0]
    assert (old.layout, old.completed, old.mean_itl_ms, old.total_throughput) == ("sglang", 3000, 174.54, None)
    plot = parse_bench_serving(sample("sglang-bench/v0.5.6-2025-12-ascii-plot-before-result-block-EXCERPT.txt"))[0]
    assert (plot.layout, plot.backend, plot.request_rate) == ("sglang", "sglang-oai", float("inf"))
    pad = parse_bench_serving(sample(
        "sglang-bench/v0.5.x-2025-antgroup-fork-terminal-padded-trailing-whitespace-EXCERPT.txt"))[0]
    assert (pad.completed, pad.duration, pad.total_input_tokens) == (1, 332.06, 8192)


def test_bench_jsonl_record_with_null_accept_length():
    (r,) = parse_bench_serving_jsonl(sample(
        "sglang-bench/bench-serving-output-file-jsonl-record-accept-length-null-2025-10.txt"))
    assert (r.source, r.accept_length, r.completed, r.max_concurrency) == ("jsonl", None, 300, 16)
    assert r.request_rate == float("inf") and r.mean_tpot_ms == pytest.approx(4.765, abs=1e-3)
    assert parse_bench_serving_jsonl('{"completed": 3, "duration": 1.0, "accept_length": 2.5}')[0].accept_length == 2.5


def test_eagle_reference_lines():
    lines = parse_eagle_bench_lines(sample("sglang-bench/bench-sglang-eagle-mtbench-eagle3-vs-eagle2-2025-03.txt"))
    assert [(x.label, x.accept_length) for x in lines] == [("EAGLE-3 (num_steps=8)", 5.39),
                                                         ("EAGLE-3 (num_steps=5)", 4.68),
                                                         ("EAGLE-2 (num_steps=8)", 3.76)]


def test_send_one_table_and_old_lines():
    # SYNTHETIC: the table layout send_one.py prints (tabulate 'pretty'), values made up for the test
    table = ("+-------------+--------+------------+-----------------+\n"
             "| Latency (s) | Tokens | Acc Length | Speed (token/s) |\n"
             "+-------------+--------+------------+-----------------+\n"
             "|    1.234    |  512   |   3.210    |     414.91      |\n"
             "+-------------+--------+------------+-----------------+\n")
    r = parse_send_one(table)
    assert (r.latency_s, r.tokens, r.acc_length, r.speed) == (1.234, 512, 3.21, 414.91)
    assert parse_send_one("acc_length=2.50\nspeed=150.30 token/s\n").acc_length == 2.5
    with pytest.raises(ParseError):
        parse_send_one("nothing here")


def test_server_args_refuses_text_without_it():
    with pytest.raises(ParseError):
        parse_server_args(real("sglang_logs/issue1270-2024-time-only-tp0-decode-period-EXCERPT.txt"))
    d = parse_server_args("server_args=ServerArgs(model_path='m', dtype=torch.float16, tp_size=2)")
    assert d.args == {"model_path": "m", "tp_size": 2} and d.non_literal == {"dtype": "torch.float16"}
