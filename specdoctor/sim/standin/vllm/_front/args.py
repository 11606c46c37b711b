"""vLLM 0.26's server flags as the stand-in reads them (engine/arg_utils.py, entrypoints/openai/cli_args.py).

Self-contained (the sandbox's interpreter has no specdoctor). Maps the flags onto the shared twin model's
argument names (tp_size, speculative_*, disable_cuda_graph ...), keeping vLLM's own names beside them.
"""

from __future__ import annotations

import json

__all__ = ["parse_args", "FlagError"]

_SWITCHES = {"enforce_eager", "disable_log_stats", "trust_remote_code", "disable_custom_all_reduce",
             "enable_prefix_caching", "no_enable_prefix_caching", "enable_chunked_prefill", "disable_log_requests",
             "enable_log_requests", "skip_tokenizer_init", "async_scheduling", "no_async_scheduling",
             "enable_expert_parallel", "disable_uvicorn_access_log"}
_SHORT = {"-tp": "tensor_parallel_size", "-sc": "speculative_config", "-cc": "compilation_config",
          "-pp": "pipeline_parallel_size", "-dp": "data_parallel_size"}
_JSON = {"speculative_config", "compilation_config", "profiler_config", "attention_config"}
_INT = {"tensor_parallel_size", "port", "max_num_seqs", "max_model_len", "seed", "pipeline_parallel_size",
        "data_parallel_size", "spec_tokens"}
_FLOAT = {"gpu_memory_utilization"}


class FlagError(ValueError):
    """argparse's `error: ...` (the real server exits 2 with usage)."""


def _convert(dest: str, raw: str):
    if dest in _JSON:
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise FlagError(f"argument --{dest.replace('_', '-')}: invalid loads value: {raw!r}") from exc
    try:
        if dest in _INT:
            return int(raw)
        if dest in _FLOAT:
            return float(raw)
    except ValueError as exc:
        raise FlagError(f"argument --{dest.replace('_', '-')}: invalid value: {raw!r}") from exc
    return raw


def _read(argv: list[str]) -> tuple[dict, str | None]:
    values: dict = {}
    model = None
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if not tok.startswith("-"):
            if model is not None:
                raise FlagError(f"unrecognized arguments: {tok}")
            model = tok
            continue
        name, eq, inline = tok.partition("=")
        if name.startswith("-O") and not name.startswith("--") and len(name) > 2:
            values["optimization_level"] = name[2:]
            continue
        dest = _SHORT.get(name) or name.lstrip("-").replace("-", "_")
        dest, dot, sub = dest.partition(".")
        if dest in _SWITCHES and not eq:
            values[dest] = True
            continue
        raw = inline if eq else None
        if raw is None:
            if i >= len(argv):
                raise FlagError(f"argument {name}: expected one argument")
            raw, i = argv[i], i + 1
        if dot:
            values.setdefault(dest, {})[sub] = json.loads(raw) if raw[:1] in "0123456789[{\"tf" else raw
        else:
            values[dest] = _convert(dest, raw)
    return values, model


def parse_args(argv: list[str], entry: str) -> dict:
    """Resolved server args: vLLM's names plus the twin model's (FlagError on a bad line)."""
    values, model = _read(argv)
    model = values.pop("model", None) or model
    if not model:
        raise FlagError("the following arguments are required: model_tag" if entry == "serve" else
                        "--model is required")
    spec = dict(values.get("speculative_config") or {})
    for short, key in (("spec_method", "method"), ("spec_model", "model"), ("spec_tokens", "num_speculative_tokens")):
        if values.get(short) is not None:
            spec[key] = values[short]
    k = int(spec.get("num_speculative_tokens") or 0) if spec else 0
    if spec and spec.get("method") in ("eagle", "eagle3") and (not spec.get("model") or k <= 0):
        raise FlagError("speculative_config: EAGLE needs 'model' and 'num_speculative_tokens' > 0")
    cc = values.get("compilation_config") or {}
    eager = bool(values.get("enforce_eager")) or str(cc.get("cudagraph_mode", "")).upper() == "NONE" or \
        str(values.get("optimization_level")) == "0"
    method = str(spec.get("method")) if spec.get("method") else None
    args = {"model_path": model, "host": values.get("host") or "0.0.0.0", "port": int(values.get("port") or 8000),
            "tp_size": int(values.get("tensor_parallel_size") or 1),
            "speculative_algorithm": method.upper() if method else None,
            "speculative_draft_model_path": spec.get("model"), "speculative_num_steps": k if spec else None,
            "speculative_eagle_topk": 1 if spec else None, "speculative_num_draft_tokens": k + 1 if spec else None,
            "disable_cuda_graph": eager, "enforce_eager": bool(values.get("enforce_eager")),
            "attention_backend": values.get("attention_backend"),
            "mem_fraction_static": float(values.get("gpu_memory_utilization") or 0.9),
            "base_gpu_id": 0, "decode_log_interval": 40, "skip_server_warmup": True,
            "disable_log_stats": bool(values.get("disable_log_stats")),
            "profiler_config": values.get("profiler_config"), "speculative_config": spec or None,
            "served_model_name": values.get("served_model_name") or model}
    if spec.get("rejection_sample_method") == "synthetic" and spec.get("synthetic_acceptance_length"):
        args["synthetic_acceptance_length"] = float(spec["synthetic_acceptance_length"])
    for key, value in values.items():
        args.setdefault(key, value)
    return args
