"""vLLM 0.26 outputs mapped onto the engine-neutral shapes: launch lines, log lines, /metrics, /version, envs.py.

Every format here is read from vLLM's v0.26.0 source (the PyPI wheel's Python files); the source file and line are
named next to each pattern. Nothing here imports vLLM.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
from typing import Any

from pydantic import BaseModel

from specdoctor.parsers.environ import EnvDecl, EnvironCatalog
from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.launch_args import LaunchArgs
from specdoctor.parsers.sglang import (
    DecodeLine,
    MetaInfo,
    ServerInfo,
    _launch_cuts,
    split_command,
)
from specdoctor.parsers.text import clean_lines, clean_text, flag_clipped, strip_ansi

__all__ = ["parse_vllm_launch", "drop_vllm_speculative", "with_vllm_profiler", "parse_vllm_stats", "parse_vllm_metrics",
           "spec_counters", "accept_length_between", "complete_meta", "parse_vllm_envs", "startup_cuda_graph", "read_completion",
           "read_version", "SpecCounters", "VLLM_DEFAULT_PORT"]

VLLM_DEFAULT_PORT = 8000  # vllm/entrypoints/openai/cli_args.py: port: int = 8000

# Flags that take no value (argparse store_true / BooleanOptionalAction in vllm/engine/arg_utils.py and
# vllm/entrypoints/openai/cli_args.py); every other flag takes the next token as its value.
_SWITCHES = {
    "enforce_eager", "disable_log_stats", "trust_remote_code", "disable_custom_all_reduce", "enable_prefix_caching",
    "no_enable_prefix_caching", "enable_chunked_prefill", "no_enable_chunked_prefill", "disable_log_requests",
    "enable_log_requests", "disable_frontend_multiprocessing", "aggregate_engine_logging", "headless",
    "skip_tokenizer_init", "enable_auto_tool_choice", "disable_uvicorn_access_log", "enable_expert_parallel",
    "async_scheduling", "no_async_scheduling", "enable_lora", "disable_fastapi_docs", "enable_prompt_tokens_details",
    "enable_server_load_tracking", "enable_force_include_usage", "enable_tokenizer_info_endpoint",
    "fail_on_environ_validation", "no_fail_on_environ_validation", "enable_sleep_mode",
}
# Short aliases (arg_utils.py:1014 `-tp`, :1539 `-sc`, :1559 `-cc`; cli_args `-ac` is attention-config).
_SHORT = {"-tp": "tensor_parallel_size", "-sc": "speculative_config", "-cc": "compilation_config",
          "-ac": "attention_config", "-pp": "pipeline_parallel_size", "-dp": "data_parallel_size",
          "-q": "quantization", "-O": "optimization_level"}
_JSON_FLAGS = {"speculative_config", "compilation_config", "attention_config", "profiler_config"}
_INT_FLAGS = {"tensor_parallel_size", "port", "pipeline_parallel_size", "data_parallel_size", "max_num_seqs",
              "max_model_len", "seed"}
_SPEC_FLAGS = {"speculative_config", "spec_method", "spec_model", "spec_tokens"}  # arg_utils.py:1538-1546
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = {"nohup", "setsid", "exec", "stdbuf", "time", "env"}
_PY = re.compile(r"^python[0-9.]*$")
_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main")


def _locate(tokens: list[str]) -> tuple[dict[str, str], str, str | None, int]:
    """(leading env, entry, python, index of the first server argument); entry serve | api_server | bare. The env
    words and wrappers before the program are `_lead(tokens)` long."""
    env: dict[str, str] = {}
    i = 0
    while i < len(tokens) and (_ENV_ASSIGN.match(tokens[i]) or os.path.basename(tokens[i]) in _WRAPPERS):
        if _ENV_ASSIGN.match(tokens[i]):
            k, _, v = tokens[i].partition("=")
            env[k] = v
        i += 1
    start = i
    for j in range(i, len(tokens)):
        t = tokens[j]
        if t == "-m" and j + 1 < len(tokens) and tokens[j + 1] in _MODULES:
            py = tokens[j - 1] if j > start else None
            if tokens[j + 1].endswith("cli.main") and j + 2 < len(tokens) and tokens[j + 2] == "serve":
                return env, "serve", py, j + 3
            return env, "api_server", py, j + 2
        if t == "serve" and j > start and os.path.basename(tokens[j - 1]) == "vllm":
            py = tokens[start] if _PY.match(os.path.basename(tokens[start])) else None
            return env, "serve", py, j + 1
        if t.startswith("-"):
            return env, "bare", None, j
    return env, "bare", None, len(tokens)


def _lead(tokens: list[str]) -> int:
    """How many leading `K=V` words and wrappers (env, nohup...) come before the program."""
    i = 0
    while i < len(tokens) and (_ENV_ASSIGN.match(tokens[i]) or os.path.basename(tokens[i]) in _WRAPPERS):
        i += 1
    return i


def _dest(tok: str) -> tuple[str, str | None, str | None]:
    """(dest, inline value, dotted sub-key) of a flag token: `--a-b=1`, `-tp`, `--speculative-config.method`."""
    name, eq, inline = tok.partition("=")
    if name in _SHORT:
        return _SHORT[name], inline if eq else None, None
    if name.startswith("-O") and len(name) > 2 and not name.startswith("--"):  # -O3 (argparse_utils.py:322)
        return "optimization_level", name[2:], None
    dest = name.lstrip("-").replace("-", "_")
    dest, dot, sub = dest.partition(".")
    return dest, inline if eq else None, sub if dot else None


def _value(dest: str, raw: str, problems: list[str]) -> Any:
    if dest in _JSON_FLAGS:
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            problems.append(f"--{dest.replace('_', '-')}: not JSON: {raw[:60]!r}")
            return None
    if dest in _INT_FLAGS:
        try:
            return int(raw)
        except ValueError:
            problems.append(f"--{dest.replace('_', '-')}: not a number: {raw!r}")
            return None
    return raw


def _read_flags(tokens: list[str], i: int, problems: list[str]) -> tuple[dict[str, Any], str | None]:
    """dest -> value of every server argument from i on; the positional model (`vllm serve MODEL`)."""
    values: dict[str, Any] = {}
    model: str | None = None
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("-"):
            if model is None:
                model = tok
            else:
                problems.append(f"stray argument {tok!r}")
            continue
        dest, inline, sub = _dest(tok)
        if dest in _SWITCHES and inline is None:
            values[dest] = True
            continue
        raw = inline
        if raw is None and i < len(tokens) and not (tokens[i].startswith("-") and not _is_number(tokens[i])):
            raw, i = tokens[i], i + 1
        if raw is None:
            values[dest] = True
            continue
        if sub:  # --speculative-config.method eagle3 (argparse_utils.py: dotted keys into the JSON flag)
            values.setdefault(dest, {})
            if isinstance(values[dest], dict):
                values[dest][sub] = _scalar(raw)
            continue
        values[dest] = _value(dest, raw, problems)
    return values, model


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _scalar(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _speculative(values: dict[str, Any]) -> dict[str, Any]:
    """The speculative config from `--speculative-config` JSON and the `--spec-*` shorthands (arg_utils.py:1538)."""
    spec = dict(values.get("speculative_config") or {}) if isinstance(values.get("speculative_config"), dict) else {}
    for short, key in (("spec_method", "method"), ("spec_model", "model"), ("spec_tokens", "num_speculative_tokens")):
        if values.get(short) is not None:
            spec[key] = _scalar(str(values[short]))
    return spec


def _no_cuda_graph(values: dict[str, Any]) -> bool:
    """CUDA graphs off: --enforce-eager (config/vllm.py:1391 'Cudagraph is disabled under eager mode'), a
    compilation config with cudagraph_mode NONE, or -O0 (config/vllm.py:84: no compilation, no cudagraphs)."""
    cc = values.get("compilation_config")
    mode = str(cc.get("cudagraph_mode", "")) if isinstance(cc, dict) else ""
    return bool(values.get("enforce_eager")) or mode.upper() == "NONE" or str(values.get("optimization_level")) == "0"


@flag_clipped(_launch_cuts)
def parse_vllm_launch(cmd: str | list[str]) -> LaunchArgs:
    """Parse `vllm serve MODEL ...`, `python -m vllm.entrypoints.openai.api_server --model ...` or a flag list
    (decorations of a pasted capture removed); ParseError when a value has a shape vLLM would refuse."""
    try:
        return _parse_launch(clean_text(cmd) if isinstance(cmd, str) else cmd)
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        if isinstance(exc, ParseError):
            raise
        raise ParseError(f"vLLM launch line not read: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}") \
            from None


def _parse_launch(cmd: str | list[str]) -> LaunchArgs:
    tokens = split_command(cmd)
    env, entry, python, i = _locate(tokens)
    out = LaunchArgs(argv=tokens, env=env, prefix=tokens[_lead(tokens):i], entry=entry, python=python, flags=tokens[i:],
                     port=VLLM_DEFAULT_PORT)
    values, model = _read_flags(tokens, i, out.problems)
    given = values.pop("model", None)
    out.model_path = str(given) if given not in (None, True) else model
    if values.get("host") and values["host"] is not True:
        out.host = str(values["host"])
    if isinstance(values.get("port"), int):
        out.port = values["port"]
    if isinstance(values.get("tensor_parallel_size"), int):
        out.tp_size = values["tensor_parallel_size"]
    spec = _speculative(values)
    # The engine's own flags stay comparable (and revertible) under their names; the neutral fields read from them
    # are marked derived.
    out.derived = ["model_path", "tp_size", "speculative_algorithm", "speculative_draft_model_path",
                   "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                   "disable_cuda_graph"]
    if isinstance(values.get("speculative_config"), dict):
        out.extra["speculative_config"] = json.dumps(values["speculative_config"], sort_keys=True,
                                                     separators=(",", ":"))
    if spec.get("method") or spec.get("model"):
        out.speculative_algorithm = str(spec.get("method") or "draft_model")
        out.speculative_draft_model_path = str(spec["model"]) if spec.get("model") is not None else None
        k = spec.get("num_speculative_tokens")
        if isinstance(k, int) and not isinstance(k, bool):
            # An EAGLE chain drafts k tokens in k steps, top-1 each; verify scores k drafts plus the bonus token.
            out.speculative_num_steps, out.speculative_eagle_topk, out.speculative_num_draft_tokens = k, 1, k + 1
        if spec.get("draft_tensor_parallel_size") is not None:
            out.extra["draft_tensor_parallel_size"] = spec["draft_tensor_parallel_size"]
    ac = values.get("attention_config")
    backend = values.get("attention_backend") or (ac.get("backend") if isinstance(ac, dict) else None)
    out.attention_backend = str(backend) if backend is not None and backend is not True else None
    out.disable_cuda_graph = _no_cuda_graph(values)
    out.disable_custom_all_reduce = bool(values.get("disable_custom_all_reduce"))
    for key in ("host", "port", "attention_backend", "disable_custom_all_reduce", "speculative_config"):
        values.pop(key, None)
    out.extra.update(values)
    return out


def drop_vllm_speculative(cmd: str | list[str]) -> list[str]:
    """The baseline: the same argv without `--speculative-config` (any spelling) and the `--spec-*` shorthands."""
    return _drop_flags(cmd, _SPEC_FLAGS)


def with_vllm_profiler(cmd: str | list[str], folder: str) -> list[str]:
    """The same argv with vLLM's torch profiler on, its traces into `folder` (config/profiler.py: `profiler`,
    `torch_profiler_dir`; with_stack stays at its default, on, for the Python frames the phases are read from):
    any `--profiler-config` already given (JSON or dotted keys) is replaced."""
    cfg = json.dumps({"profiler": "torch", "torch_profiler_dir": folder}, separators=(",", ":"))
    return [*_drop_flags(cmd, {"profiler_config"}), "--profiler-config", cfg]


def _drop_flags(cmd: str | list[str], dests: set[str]) -> list[str]:
    """The argv without every server argument whose dest is in `dests` (any spelling), and its value."""
    tokens = split_command(cmd)
    _, _, _, i = _locate(tokens)
    out = tokens[:i]
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("-"):
            out.append(tok)
            continue
        dest, inline, _ = _dest(tok)
        if dest in dests:
            if inline is None and i < len(tokens) and not tokens[i].startswith("-"):
                i += 1
            continue
        out.append(tok)
    return out


# -- logs ------------------------------------------------------------------------------------------------------
# vllm/v1/metrics/loggers.py:262-311 `Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput:
# %.1f tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%`
_STATS = re.compile(r"Engine (?P<engine>\d+): Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, Avg generation "
                    r"throughput: (?P<gen>[\d.]+) tokens/s, Running: (?P<running>\d+) reqs, Waiting: "
                    r"(?P<waiting>\d+) reqs(?:.*?GPU KV cache usage: (?P<kv>[\d.]+)%)?")
# vllm/v1/spec_decode/metrics.py:120-135 `SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput:
# %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position
# acceptance rate: %s, Avg Draft acceptance rate: %.1f%%`
_SPEC = re.compile(r"SpecDecoding metrics: Mean acceptance length: (?P<mal>[\d.]+|nan), .*?Accepted: "
                   r"(?P<acc>\d+) tokens, Drafted: (?P<drafted>\d+) tokens, .*?Avg Draft acceptance rate: "
                   r"(?P<rate>[\d.]+|nan)%")
# vllm/logger.py:22 `%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s`, date `%m-%d %H:%M:%S`
_TIME = re.compile(r"\b(?:INFO|DEBUG|WARNING|ERROR)\s+(?P<ts>\d{2}-\d{2} \d{2}:\d{2}:\d{2})")


def _finite(v: str | None) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _stats_cuts(text: str, result: Any) -> Any:
    """A stats line without its closing `Prefix cache hit rate: X%`, a spec line without `Avg Draft acceptance
    rate: X%`: a narrow terminal cut them."""
    for line in clean_lines(text):
        if "Avg prompt throughput" in line and not re.search(r"Prefix cache hit rate: [\d.]+%", line):
            yield f"a stats line without its closing field: {line.strip()[-50:]!r}"
            return
        if "SpecDecoding metrics" in line and not re.search(r"Avg Draft acceptance rate: (?:[\d.]+|nan)%", line):
            yield f"a SpecDecoding line without its closing field: {line.strip()[-50:]!r}"
            return


@flag_clipped(_stats_cuts)
def parse_vllm_stats(text: str) -> list[DecodeLine]:
    """The periodic stats lines as DecodeLines: throughput and running requests from `Engine NNN:`, the accept
    length of the same tick from the `SpecDecoding metrics:` line logged right after it (loggers.py:315)."""
    out: list[DecodeLine] = []
    # The time is in vLLM's own prefix, which the clean-up removes with the other decorations.
    for raw, line in zip(strip_ansi(text).split("\n"), clean_lines(text), strict=False):
        m = _STATS.search(line)
        if m:
            t = _TIME.search(raw)
            kv = _finite(m["kv"])
            out.append(DecodeLine(time=t["ts"] if t else None, rank=f"Engine{int(m['engine']):03d}",
                                  running_req=int(m["running"]), queue_req=int(m["waiting"]),
                                  gen_throughput=float(m["gen"]), token_usage=kv / 100 if kv is not None else None))
            continue
        s = _SPEC.search(line)
        if s and out and out[-1].accept_len is None:
            rate = _finite(s["rate"])
            out[-1].accept_len = _finite(s["mal"])
            out[-1].accept_rate = rate / 100 if rate is not None else None
    return out


# vllm/v1/worker/gpu_model_runner.py:6845 `Graph capturing finished in %.0f secs, took %.2f GiB`;
# vllm/config/vllm.py:1392 `Cudagraph is disabled under eager mode`, :1163 `Enforce eager set, disabling torch.compile
# and CUDAGraphs. …`
_GRAPH_ON = re.compile(r"Graph capturing finished in \d+ secs")
_GRAPH_OFF = re.compile(r"Cudagraph is disabled under eager mode|Enforce eager set, disabling torch.compile|"
                        r"enforce_eager=True")


def startup_cuda_graph(text: str) -> bool | None:
    """Whether the last start in a log captured CUDA graphs (None: the log does not say)."""
    last: bool | None = None
    for line in text.splitlines():
        if _GRAPH_OFF.search(line):
            last = False
        elif _GRAPH_ON.search(line):
            last = True
    return last


# -- /metrics ----------------------------------------------------------------------------------------------------
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")


def parse_vllm_metrics(text: str) -> dict[str, float]:
    """Prometheus text → name → value summed over label sets (engines, positions)."""
    out: dict[str, float] = {}
    for line in clean_lines(text):
        if line.startswith("#") or not line.strip():
            continue
        m = _SAMPLE.match(line.strip())
        if not m:
            continue
        try:
            v = float(m["value"])
        except ValueError:
            continue
        out[m["name"]] = out.get(m["name"], 0.0) + v
    return out


class SpecCounters(BaseModel):
    """The spec-decoding counters of /metrics (spec_decode/metrics.py:229-231; prometheus adds `_total`)."""

    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None


def spec_counters(text: str) -> SpecCounters:
    """`vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`, `..._num_accepted_tokens_total`."""
    m = parse_vllm_metrics(text)
    return SpecCounters(drafts=m.get("vllm:spec_decode_num_drafts_total"),
                        draft_tokens=m.get("vllm:spec_decode_num_draft_tokens_total"),
                        accepted_tokens=m.get("vllm:spec_decode_num_accepted_tokens_total"))


def accept_length_between(before: SpecCounters, after: SpecCounters) -> float | None:
    """Mean acceptance length over a window: 1 + accepted / drafts (spec_decode/metrics.py:114, the bonus token
    counted); None when no draft ran in between or a counter is missing."""
    if None in (before.drafts, after.drafts, before.accepted_tokens, after.accepted_tokens):
        return None
    drafts = float(after.drafts) - float(before.drafts)  # type: ignore[arg-type]
    if drafts <= 0:
        return None
    return 1.0 + (float(after.accepted_tokens) - float(before.accepted_tokens)) / drafts  # type: ignore[arg-type]


def complete_meta(meta: MetaInfo, before: str, after: str) -> MetaInfo:
    """One request's server-side numbers from the growth of /metrics around it, when exactly one request finished
    in between: `vllm:e2e_request_latency_seconds` and `vllm:time_to_first_token_seconds` (v1/metrics/loggers.py:913,
    :797; histogram _sum/_count), drafts and accepted tokens (spec_decode/metrics.py:229-231)."""
    a, b = parse_vllm_metrics(before), parse_vllm_metrics(after)

    def grew(name: str) -> float | None:
        return b[name] - a.get(name, 0.0) if name in b else None

    update: dict[str, Any] = {}
    if grew("vllm:e2e_request_latency_seconds_count") == 1 and meta.e2e_latency is None:
        update["e2e_latency"] = grew("vllm:e2e_request_latency_seconds_sum")
        if grew("vllm:time_to_first_token_seconds_count") == 1:
            update["first_token_latency"] = grew("vllm:time_to_first_token_seconds_sum")
    drafts, accepted = grew("vllm:spec_decode_num_drafts_total"), grew("vllm:spec_decode_num_accepted_tokens_total")
    if drafts and accepted is not None and meta.spec_accept_length is None:
        update.update(spec_verify_ct=int(drafts), spec_num_correct_drafts=int(accepted),
                      spec_accept_length=1.0 + accepted / drafts)
    return meta.model_copy(update=update) if update else meta


# -- HTTP bodies -----------------------------------------------------------------------------------------------

def read_completion(body: Any) -> MetaInfo:
    """A `/v1/completions` response: `usage` tokens and the choice's finish reason (no per-request spec counts)."""
    if not isinstance(body, dict):
        return MetaInfo()
    raw_usage, raw_choices = body.get("usage"), body.get("choices")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    choices: list[Any] = raw_choices if isinstance(raw_choices, list) else []
    first: dict[str, Any] = choices[0] if choices and isinstance(choices[0], dict) else {}
    return MetaInfo(completion_tokens=usage.get("completion_tokens"), prompt_tokens=usage.get("prompt_tokens"),
                    finish_reason=first.get("finish_reason"))


def read_version(body: Any) -> ServerInfo:
    """`/version` (serve/instrumentator/basic.py:53 `{"version": VLLM_VERSION}`) as ServerInfo."""
    version = body.get("version") if isinstance(body, dict) else None
    return ServerInfo(version=str(version) if version else None)


# -- envs.py ---------------------------------------------------------------------------------------------------

def _getenv_default(node: ast.AST, name: str) -> str | None:
    """The default of `os.getenv(NAME, "d")` / `os.environ.get(NAME, "d")` inside an entry's lambda."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in ("getenv", "get") \
                and len(sub.args) >= 2 and isinstance(sub.args[0], ast.Constant) and sub.args[0].value == name \
                and isinstance(sub.args[1], ast.Constant) and isinstance(sub.args[1].value, str):
            return sub.args[1].value
    return None


def parse_vllm_envs(text: str) -> EnvironCatalog:
    """Every variable `vllm/envs.py` declares: the `if TYPE_CHECKING:` block's `NAME: type = default` lines (the
    defaults as written), and names only in the `environment_variables` dict (their `os.getenv` default);
    ParseError when the file is no Python."""
    try:
        tree = ast.parse(clean_text(text))
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise ParseError(f"envs.py is not Python: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}") from None
    fields: list[EnvDecl] = []
    seen: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    name = stmt.target.id
                    src = ast.unparse(stmt.value) if stmt.value is not None else "None"
                    try:
                        default = ast.literal_eval(stmt.value) if stmt.value is not None else None
                    except (ValueError, TypeError, SyntaxError, RecursionError):
                        default = None  # computed (tempfile.gettempdir(), os.path.expanduser(...))
                    fields.append(EnvDecl(name=name, type=ast.unparse(stmt.annotation), env_class="envs.py",
                                          default=default, default_source=src, line=stmt.lineno))
                    seen.add(name)
        targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets if isinstance(node, ast.Assign) \
            else []
        value = node.value if isinstance(node, ast.AnnAssign | ast.Assign) else None
        if any(isinstance(t, ast.Name) and t.id == "environment_variables" for t in targets) and \
                isinstance(value, ast.Dict):
            for key, reader in zip(value.keys, value.values, strict=False):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value not in seen:
                    default = _getenv_default(reader, key.value)
                    fields.append(EnvDecl(name=key.value, type="str", env_class="envs.py", default=default,
                                          default_source=repr(default) if default is not None else "None",
                                          line=key.lineno))
                    seen.add(key.value)
    return EnvironCatalog(fields=fields)

