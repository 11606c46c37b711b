"""One registry of every public parser: how to call it on text, its critical fields, and the samples it reads.

Shared by the property tests (test_properties.py) and the hold-out scoring (holdout.py), so a parser's critical
fields are written down once. Samples are paths under tests/fixtures; SYNTHETIC inputs (formats with no real
sample in the repo) are written here, each from the documented layout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.parsers import (
    environ,
    git,
    nccl,
    nvidia_smi,
    nvidia_smi_table,
    proc_table,
    sglang,
    sglang_bench,
    sglang_check_env,
    sglang_server_args,
    sglang_startup,
    sglang_trace,
    vllm,
    vllm_trace,
)

__all__ = ["FIXTURES", "Case", "CASES", "fixture_text", "problems_of"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fixture_text(rel: str) -> str:
    """A fixture's text without the '# source:' / '# context:' header lines the sample folders carry."""
    lines = (FIXTURES / rel).read_text(encoding="utf-8").splitlines(keepends=True)
    while lines and lines[0].startswith(("# source:", "# context:")):
        lines.pop(0)
    return "".join(lines)


def problems_of(result: Any) -> list[str]:
    """The problems a result reports (models, and the list results of line-oriented parsers)."""
    found = list(getattr(result, "problems", []) or [])
    for name in ("topology",):
        sub = getattr(result, name, None)
        if sub is not None:
            found += problems_of(sub)
    return found


@dataclass(frozen=True)
class Case:
    """How the property tests call one parser and what must survive decoration."""

    name: str = field(metadata={"doc": "module.function, as discovered by introspection."})
    parse: Callable[[str], Any]
    critical: Callable[[Any], Any]
    samples: tuple[str, ...] = ()
    synthetic: tuple[str, ...] = ()
    line_oriented: bool = field(default=True, metadata={"doc": "Terminal text (may be clipped); False for JSON, "
                                                           "-z and NUL-separated records."})

    def texts(self) -> list[str]:
        return [fixture_text(s) for s in self.samples] + list(self.synthetic)


def _g(obj: Any, *names: str) -> tuple[Any, ...]:
    return tuple(getattr(obj, n) for n in names)


def _topo(t: nvidia_smi.Topology) -> Any:
    return (t.devices, t.links, t.cpu_affinity, t.numa_affinity)


def _bench(rs: list[sglang_bench.BenchServingResult]) -> Any:
    return [_g(r, "layout", "backend", "request_rate", "max_concurrency", "completed", "duration",
               "output_throughput", "total_throughput", "accept_length", "mean_ttft_ms", "mean_itl_ms") for r in rs]


def _startup(t: sglang_startup.StartupTimings) -> Any:
    return (t.load_begin_at, t.load_end_at, t.models_loaded, t.cuda_graph_s, t.ready_at, t.engine_timings,
            t.load_weight_s)


def _launch(a: sglang.LaunchArgs) -> Any:
    return (a.env, a.model_path, a.port, a.tp_size, a.speculative_algorithm, a.speculative_draft_model_path,
            a.speculative_num_steps, a.speculative_eagle_topk, a.speculative_num_draft_tokens, a.cuda_graph_max_bs,
            a.disable_cuda_graph, a.extra)


_VLLM = "vllm-0.26-constructed/"


def _vllm_launch(a: sglang.LaunchArgs) -> Any:
    return (a.env, a.model_path, a.port, a.tp_size, a.speculative_algorithm, a.speculative_draft_model_path,
            a.speculative_num_steps, a.disable_cuda_graph, a.extra)


def _smi_table(t: nvidia_smi_table.SmiTable) -> Any:
    return (t.driver, t.cuda, [_g(g, "index", "name", "bus_id", "memory_used_mib", "memory_total_mib", "power_w",
                                  "power_cap_w", "perf") for g in t.gpus],
            [_g(p, "gpu", "pid", "name", "memory_mib") for p in t.processes])


def _q(r: nvidia_smi.QReport) -> Any:
    return (r.driver, r.cuda, [_g(g, "bus_id", "name", "pcie_gen_current", "pcie_gen_max", "pcie_width_current",
                                  "sm_clock_mhz", "max_sm_clock_mhz", "power_limit_w", "process_pids")
                               for g in r.gpus])


def _nccl_run(r: nccl.NcclTestsRun) -> Any:
    return (r.collective, r.ngpus, r.nccl_version, r.avg_busbw,
            [(row.size, row.time_us, row.in_place.busbw if row.in_place else None) for row in r.rows])


def _check_env(e: sglang_check_env.CheckEnv) -> Any:
    return (e.python, e.gpus, e.compute_capability, e.nvcc, e.driver, e.sglang, e.torch,
            _topo(e.topology) if e.topology else None)


_QUERY_FIELDS = ["index", "name", "uuid", "pci.bus_id", "driver_version", "clocks.current.sm", "clocks.max.sm",
                 "clocks.current.memory", "power.limit", "pcie.link.gen.current", "pcie.link.gen.max",
                 "pcie.link.width.current", "pcie.link.width.max", "persistence_mode", "memory.total"]
# The documented layouts (nvidia-smi --help-query-gpu; bench_one_batch_server's markdown table).
SYNTH_QUERY_CSV = ("index, name, uuid, pci.bus_id, driver_version, clocks.current.sm [MHz], clocks.max.sm [MHz], "
                   "clocks.current.memory [MHz], power.limit [W], pcie.link.gen.current, pcie.link.gen.max, "
                   "pcie.link.width.current, pcie.link.width.max, persistence_mode, memory.total [MiB]\n"
                   "0, NVIDIA H100 80GB HBM3, GPU-1111, 00000000:18:00.0, 550.54.15, 1980 MHz, 1980 MHz, 2619 MHz, "
                   "700.00 W, 5, 5, 16, 16, Enabled, 81559 MiB\n"
                   "1, NVIDIA H100 80GB HBM3, GPU-2222, 00000000:2A:00.0, 550.54.15, 345 MHz, 1980 MHz, 2619 MHz, "
                   "700.00 W, 1, 5, 16, 16, Enabled, 81559 MiB\n")
SYNTH_ONE_BATCH = ("| batch size | input len | latency (s) | input throughput (tok/s) | output throughput (tok/s) "
                   "| acc length | ITL (ms) |\n"
                   "|------------|-----------|-------------|--------------------------|---------------------------"
                   "|------------|----------|\n"
                   "| 1 | 1024 | 2.31 | 14325.21 | 231.07 | 3.12 | 4.33 |\n"
                   "| 16 | 1024 | 5.87 | 31220.50 | 1462.93 | 3.05 | 10.94 |\n")
SYNTH_NUMSTAT_Z = ("12\t3\tpython/sglang/srt/speculative/eagle_worker.py\x00-\t-\tdocs/img.png\x00"
                   "4\t0\tpython/sglang/srt/server_args.py\x00")
SYNTH_NAME_STATUS_Z = "M\x00python/sglang/srt/server_args.py\x00A\x00python/sglang/srt/new.py\x00D\x00old.py\x00"
SYNTH_PROC_TABLE = ("/proc/1/stat:1 (systemd) S 0 1 1 0\n\x00/proc/1/cmdline:/sbin/init\x00"
                    "/proc/4242/stat:4242 (python3) S 1 4242 4242 0\n\x00/proc/4242/cmdline:python3\x00"
                    "/proc/4242/cmdline:-m\x00/proc/4242/cmdline:sglang.launch_server\x00"
                    "/proc/4243/stat:4243 (sglang::sched) S 4242 4242 4242 0\n\x00")
SYNTH_STASH = ("0123456789abcdef0123456789abcdef01234567\x00On main: specdoctor trial 3\n"
               "89abcdef0123456789abcdef0123456789abcdef\x00WIP on h/x: 1e68eda Corpus\n")
SYNTH_SUBMODULE = (" 1e68eda1234567890abcdef1234567890abcdef 3rdparty/flashinfer (v0.2.0-12-g1e68eda)\n"
                   "+5f36e71234567890abcdef1234567890abcdef0 3rdparty/cutlass (heads/main)\n")
SYNTH_SEND_ONE = ("+-------------+--------+------------+-----------------+\n"
                  "| Latency (s) | Tokens | Acc Length | Speed (token/s) |\n"
                  "+-------------+--------+------------+-----------------+\n"
                  "|    1.234    |  512   |   3.210    |     414.91      |\n"
                  "+-------------+--------+------------+-----------------+\n")
SYNTH_BACKUP = (git.REF_MARKER + "refs/specdoctor/backups/20260101-120000\x001e68eda1234567890abcdef1234567890abcdef"
                '\x00{"created": "2026-01-01T12:00:00", "head": "1e68eda", "branch": "main", "changed": ["a.py"], '
                '"stashes": [], "hash": "abc"}\n' + git.REF_MARKER
                + "refs/specdoctor/restored/20260101-120000\x001e68eda1234567890abcdef1234567890abcdef\x00\n")
SYNTH_NCCL_JSON = ('{"collective": "all_reduce", "nGpus": 2, "nccl_version": "2.21.5", "results": ['
                   '{"size": 8, "count": 2, "type": "float", "redop": "sum", "root": -1, '
                   '"out_of_place": {"time": 9.5, "algbw": 0.0, "busbw": 0.0, "wrong": 0}, '
                   '"in_place": {"time": 9.1, "algbw": 0.0, "busbw": 0.0, "wrong": 0}}]}')
SYNTH_ENV_STARTUP = ("2026-12-02 01:58:49,101 - __main__ - INFO - [2026-12-02 01:58:49 TP0] Load weight begin. "
                     "avail mem=139.13 GB\n"
                     "2026-12-02 01:58:50,202 - __main__ - INFO - [2026-12-02 01:58:50 TP0] Load weight end. "
                     "elapsed=0.16 s, type=LlamaForCausalLM, avail mem=137.44 GB, mem usage=1.68 GB.\n"
                     "0: [2026-12-02 01:59:36 TP0] Capture cuda graph end. Time elapsed: 4.27 s. mem usage=0.7 GB.\n"
                     "[1,0]<stdout>:[2026-12-02 01:59:40 TP0] Capture draft cuda graph end. Time elapsed: 1.50 s.\n"
                     "[2026-12-02 01:59:53 TP0] The server is fired up and ready to roll!\n")

# A two-cycle chrome trace in the real 0.5.17 layout (the real trimmed trace is gzip'd bytes, read by
# tests/parsers/test_sglang_trace.py): run_batch ranges holding draft / TARGET_VERIFY / draft_extend CPU ranges, each
# with its gpu_user_annotation projection (same External id).
def _trace_events() -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "sglang::scheduler"}}]
    ext = 0
    for c in range(2):
        t0 = 1000.0 + 10000.0 * c
        ev.append({"ph": "X", "cat": "user_annotation", "name": "scheduler.run_batch", "pid": 1, "tid": 7,
                   "ts": t0, "dur": 9000.0})
        for name, off, cpu, gpu in (("draft", 100.0, 2000.0, 1800.0), ("step[TARGET_VERIFY bs=1]", 2500.0, 1000.0,
                                    1830.0), ("draft_extend", 5000.0, 2800.0, 2700.0)):
            ext += 1
            ev.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 7, "ts": t0 + off,
                       "dur": cpu, "args": {"External id": ext}})
            ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0, "tid": 7, "ts": t0 + off + 50,
                       "dur": gpu, "args": {"External id": ext}})
    return ev


SYNTH_TRACE = __import__("json").dumps({"traceEvents": _trace_events()}, indent=1)


def _vllm_trace_text(steps: int = 2) -> str:
    """The real vLLM 0.26 fixture's first `steps` decode steps (its events in file order), as indented JSON."""
    import gzip
    import json

    data = (FIXTURES / "vllm-0.26-h100" / "trace" / "clean.json.gz").read_bytes()
    t = vllm_trace.parse_vllm_trace(data)
    lo, hi = t.batch_starts_ms[0] * 1000.0, t.batch_ends_ms[steps - 1] * 1000.0
    events = json.loads(gzip.decompress(data))["traceEvents"]
    return json.dumps({"traceEvents": [e for e in events if e.get("ph") == "M" or lo <= e.get("ts", -1) <= hi]},
                      indent=1)

_LOGS = "samples/sglang-logs/"
_SPEC_LOG = _LOGS + "v0.5.17-2026-12-h200-eagle3-spec-server-log-EXCERPT.txt"

CASES: list[Case] = [
    Case("environ.parse_environ_py", environ.parse_environ_py,
         lambda c: sorted((d.name, d.type, repr(d.default)) for d in c.fields),
         samples=("sglang_environ/environ_0.5.9.py", "sglang_environ/environ_0.5.23.py"), line_oriented=False),
    Case("git.parse_numstat_z", git.parse_numstat_z,
         lambda rs: [(r.path, r.added, r.removed) for r in rs], synthetic=(SYNTH_NUMSTAT_Z,),
         line_oriented=False),
    Case("git.parse_diff_stat", git.parse_diff_stat,
         lambda s: ([(f.path, f.changes, f.binary) for f in s.files], s.files_changed, s.insertions, s.deletions),
         samples=("samples/git-diff-stat/spec-metrics-pr11441.txt",
                  "samples/git-diff-stat/ci-refactor-binary-rename-pr13448.txt",
                  "real/git-diff-stat/docs-site-new-markdown-and-binary-images.txt")),
    Case("git.parse_name_status_z", git.parse_name_status_z, lambda d: d, synthetic=(SYNTH_NAME_STATUS_Z,),
         line_oriented=False),
    Case("proc_table.parse_proc_table", proc_table.parse_proc_table,
         lambda rs: [(r.pid, r.ppid, r.comm, r.argv) for r in rs], synthetic=(SYNTH_PROC_TABLE,), line_oriented=False),
    Case("git.parse_stash_list", git.parse_stash_list, lambda rs: [(r.index, r.sha, r.subject) for r in rs],
         synthetic=(SYNTH_STASH,), line_oriented=False),
    Case("git.parse_submodule_status", git.parse_submodule_status,
         lambda rs: [(r.path, r.sha, r.flag, r.describe) for r in rs], synthetic=(SYNTH_SUBMODULE,)),
    Case("git.parse_backup_refs",
         lambda t: git.parse_backup_refs(t, "refs/specdoctor/backups/", "refs/specdoctor/restored/"),
         lambda rs: [r.model_dump() for r in rs], synthetic=(SYNTH_BACKUP,), line_oriented=False),
    Case("nccl.parse_nccl_tests", nccl.parse_nccl_tests, lambda rs: [_nccl_run(r) for r in rs],
         samples=("nccl/2x-rtx2080ti-five-collectives-one-session-incl-g1-reduce.txt",
                  "nccl/a3mega-2x8-h100-mpirun-16ranks.txt", "nccl/p5en-h200-rows-elided-with-indented-dots.txt",
                  "h200/allreduce_table.txt")),
    Case("nccl.parse_nccl_tests_json", nccl.parse_nccl_tests_json, _nccl_run, synthetic=(SYNTH_NCCL_JSON,),
         line_oriented=False),
    Case("nccl.parse_all_reduce", nccl.parse_all_reduce, _nccl_run,
         samples=("nccl/a3mega-2x8-h100-mpirun-16ranks.txt", "h200/allreduce_table.txt")),
    Case("nccl.parse_nccl_debug", nccl.parse_nccl_debug,
         lambda d: (d.version, d.cuda_driver, [(e.name, e.value, e.pid) for e in d.env], len(d.lines)),
         samples=("nccl/fsdp-4x-p5-srun-label-prefix-nccl-2.26.2-ofi-mixed-with-app-log.txt",
                  "nccl/p2p-level-LOC-by-env-shm-fallback-2gpu-multi-comm-EXCERPT.txt",
                  "real/nccl_debug/nccl-issue1591-vllm-ray-bare-version-line-topology-EXCERPT.txt")),
    Case("nvidia_smi.parse_list", nvidia_smi.parse_list, lambda rs: [r.model_dump() for r in rs],
         samples=("samples/nvidia-smi-q/L-2x-quadro-rtx4000.txt", "samples/nvidia-smi-q/L-4x-rtx3090-with-prompt.txt")),
    Case("nvidia_smi.parse_query_csv", lambda t: nvidia_smi.parse_query_csv(t, _QUERY_FIELDS), lambda rs: rs,
         synthetic=(SYNTH_QUERY_CSV,)),
    Case("nvidia_smi.parse_q", nvidia_smi.parse_q, _q,
         samples=("samples/nvidia-smi-q/1x-gtx680-q-full-driver470.txt",
                  "samples/nvidia-smi-q/8x-rtx4090-q-full-driver550.txt", "h200/nvidia-smi-q.txt")),
    Case("nvidia_smi.parse_topo", nvidia_smi.parse_topo, _topo,
         samples=("samples/nvidia-smi-topo/8x-l40s-node-sys-1nic.txt",
                  "samples/nvidia-smi-topo/4x-v100-dell-c4140-nv2-mlx5-column-comma-cpulist.txt",
                  "h200/nvidia-smi-topo-m.txt")),
    Case("nvidia_smi_table.parse_smi_table", nvidia_smi_table.parse_smi_table, _smi_table,
         samples=("samples/nvidia-smi-q/8x-h100-sxm-table-driver565.txt",
                  "samples/nvidia-smi-q/1x-h200-table-driver580-sglang-scheduler.txt",
                  "real/nvidia-smi-table/gpustat-issue1-2016-process-row-no-gi-ci.txt")),
    Case("sglang.parse_launch_command", sglang.parse_launch_command, _launch,
         samples=("samples/sglang-launch/eagle3-kimi-k25-tp8-h200-2026-03.txt",
                  "samples/sglang-launch/v0.5.17-2026-12-h200-nospec-env-prefix-real-run.txt",
                  "real/sglang_launch/pr13981-mhmtp-script-exports-vars-cmdsubst-redirect.txt")),
    Case("sglang.parse_decode_lines", sglang.parse_decode_lines, lambda ls: [ln.model_dump() for ln in ls],
         samples=(_LOGS + "v0.5.5-2025-11-comma-form-cudagraph-false-above-max-bs.txt",
                  _LOGS + "v0.4.2-2025-01-ci-eagle-llama2-torchcompile-startup-decode.txt",
                  _LOGS + "v0.5.17-2026-12-h200-spec-decode-lines-EXCERPT.txt")),
    Case("sglang.parse_body", sglang.parse_body, lambda b: b,
         samples=("samples/sglang-json/grpc-GetModelInfo-2025-10-pretty.txt",
                  "samples/sglang-json/get_model_info-2025-02-python-repr.txt",
                  "samples/sglang-json/generate-0.5.17-2026-12-h200-spec-request-reply-list.txt"),
         line_oriented=False),
    Case("sglang_bench.parse_bench_serving", sglang_bench.parse_bench_serving, _bench,
         samples=("samples/sglang-bench/v0.4.0.post2-2025-01-typo-reqeuest-failed-requests-EXCERPT.txt",
                  "real/bench/sglang-pr23753-gsp-max-concurrency-16-peak-EXCERPT.txt",
                  "real/bench/vllm-pr18566-vllm-bench-serve-sharegpt-cut-closing-rule.txt")),
    Case("sglang_bench.parse_bench_serving_jsonl", sglang_bench.parse_bench_serving_jsonl, _bench,
         samples=("samples/sglang-bench/bench-serving-output-file-jsonl-record-accept-length-null-2025-10.txt",),
         line_oriented=False),
    Case("sglang_bench.parse_bench_one_batch_server", sglang_bench.parse_bench_one_batch_server,
         lambda rs: [r.model_dump() for r in rs],
         synthetic=(SYNTH_ONE_BATCH,)),
    Case("sglang_bench.parse_send_one", sglang_bench.parse_send_one, lambda r: r.model_dump(),
         synthetic=(SYNTH_SEND_ONE,), line_oriented=False),
    Case("sglang_bench.parse_eagle_bench_lines", sglang_bench.parse_eagle_bench_lines,
         lambda ls: [(x.label, x.questions, x.throughput, x.accept_length) for x in ls],
         samples=("samples/sglang-bench/bench-sglang-eagle-mtbench-eagle3-vs-eagle2-2025-03.txt",
                  "real/bench/sglang-pr4247-eagle-mtbench-no-cuda-graph-unlabeled-steps.txt")),
    Case("sglang_check_env.parse_check_env", sglang_check_env.parse_check_env, _check_env,
         samples=("real/check_env/issue2805-1x-a40-6nic-pydantic-warning-EXCERPT.txt",
                  "real/check_env/pr661-2x-a100-stray-driver-line-tabs-EXCERPT.txt")),
    Case("sglang_server_args.parse_server_args", sglang_server_args.parse_server_args,
         lambda d: (d.args, d.truncated),
         samples=("real/server_args/ci-2025-04-02-eagle3-llama31-v0.4.4.txt",
                  "real/server_args/ci-2026-04-05-qwen25-newest-key-set-v0.5.x.txt"), line_oriented=False),
    Case("sglang_trace.parse_sglang_trace", sglang_trace.parse_sglang_trace,
         lambda t: [(r.phase, r.cpu_ms, r.gpu_ms, r.cycle, r.decode_cycle) for r in t.ranges],
         synthetic=(SYNTH_TRACE,), line_oriented=False),
    Case("vllm_trace.parse_vllm_trace", vllm_trace.parse_vllm_trace,
         lambda t: [(r.phase, r.cpu_ms, r.gpu_ms, r.cycle, r.decode_cycle) for r in t.ranges],
         synthetic=(_vllm_trace_text(),), line_oriented=False),
    Case("sglang_startup.parse_startup", sglang_startup.parse_startup, _startup,
         samples=(_LOGS + "v0.4.2-2025-01-ci-eagle-llama2-torchcompile-startup-decode.txt",
                  _LOGS + "v0.4.4-2025-03-gemma3-tp1-load-weight-kv-cache.txt", _SPEC_LOG),
         synthetic=(SYNTH_ENV_STARTUP,)),
    Case("vllm.parse_vllm_launch", vllm.parse_vllm_launch, _vllm_launch,
         samples=(_VLLM + "launch-serve-tp2-eagle3.txt", _VLLM + "launch-api-server-dotted-eager.txt")),
    Case("vllm.parse_vllm_stats", vllm.parse_vllm_stats, lambda ls: [ln.model_dump() for ln in ls],
         samples=(_VLLM + "server.log", _VLLM + "server-eager.log")),
    Case("vllm.parse_vllm_metrics", vllm.parse_vllm_metrics, lambda d: d,
         samples=(_VLLM + "metrics-before.txt",), line_oriented=False),
    Case("vllm.parse_vllm_envs", vllm.parse_vllm_envs, lambda c: [(f.name, f.default) for f in c.fields],
         samples=(_VLLM + "envs_excerpt.py",), line_oriented=False),
]
