"""SGLang's server flags (real names, aliases, argparse prefix abbreviation) for 0.5.9, 0.5.17 and 0.5.23."""

from __future__ import annotations

import argparse

from .versions import measured_0517

__all__ = ["build_parser", "parse_server_args", "resolve"]

ATTN_0_5_9 = ["triton", "torch_native", "flex_attention", "nsa", "cutlass_mla", "fa3", "fa4", "flashinfer",
              "flashmla", "trtllm_mla", "trtllm_mha", "dual_chunk_flash_attn", "aiter", "wave", "intel_amx",
              "ascend", "intel_xpu"]
ATTN_0_5_23 = ["triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed", "fa3", "fa4",
               "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla",
               "trtllm_mha", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter", "wave", "intel_amx",
               "ascend", "intel_xpu"]
DRAFT_ATTN = ["flashinfer", "fa3", "fa4", "triton", "ascend", "trtllm_mha", "intel_xpu"]


class _DeprecatedStoreTrue(argparse.Action):
    """0.5.23's --disable-cuda-graph: still works, warns, sets both graph phases to disabled."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, default=False, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        import sys

        sys.stderr.write(f"WARNING: {option_string} is deprecated; use "
                         "--cuda-graph-backend-{decode,prefill}=disabled instead.\n")
        setattr(namespace, self.dest, True)


def build_parser(version: str, prog: str) -> argparse.ArgumentParser:
    """A parser with SGLang's flag names for this version (allow_abbrev stays True like SGLang's)."""
    new = not version.startswith("0.5.9")
    p = argparse.ArgumentParser(prog=prog)
    a = p.add_argument
    a("--model-path", "--model", type=str, required=True, dest="model_path")
    a("--tokenizer-path", type=str, default=None)
    a("--tokenizer-mode", type=str, default="auto")
    a("--skip-tokenizer-init", action="store_true")
    a("--load-format", type=str, default="auto")
    a("--trust-remote-code", action="store_true")
    a("--dtype", type=str, default="auto")
    a("--kv-cache-dtype", type=str, default="auto")
    a("--context-length", type=int, default=None)
    a("--served-model-name", type=str, default=None)
    a("--revision", type=str, default=None)
    a("--host", type=str, default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--mem-fraction-static", type=float, default=None)
    a("--max-running-requests", type=int, default=None)
    a("--max-total-tokens", type=int, default=None)
    a("--chunked-prefill-size", type=int, default=None)
    a("--max-prefill-tokens", type=int, default=16384)
    a("--page-size", type=int, default=1)
    a("--tensor-parallel-size", "--tp-size", type=int, default=1, dest="tp_size")
    a("--data-parallel-size", "--dp-size", type=int, default=1, dest="dp_size")
    a("--expert-parallel-size", "--ep-size", type=int, default=1, dest="ep_size")
    a("--nnodes", type=int, default=1)
    a("--node-rank", type=int, default=0)
    a("--dist-init-addr", type=str, default=None)
    a("--base-gpu-id", type=int, default=0)
    a("--random-seed", type=int, default=None)
    a("--log-level", type=str, default="info")
    a("--log-level-http", type=str, default=None)
    a("--log-requests", action="store_true")
    a("--enable-metrics", action="store_true")
    a("--enable-metrics-for-all-schedulers", action="store_true")
    a("--decode-log-interval", type=int, default=40)
    a("--api-key", type=str, default=None)
    a("--attention-backend", type=str, default=None, choices=ATTN_0_5_23 if new else ATTN_0_5_9)
    a("--prefill-attention-backend", type=str, default=None)
    a("--decode-attention-backend", type=str, default=None)
    a("--sampling-backend", type=str, default=None)
    a("--grammar-backend", type=str, default=None)
    a("--moe-runner-backend", type=str, default="auto")
    if new:
        a("--speculative-algorithm", type=str, default=None)
    else:
        a("--speculative-algorithm", type=str, default=None,
          choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"])
    a("--speculative-draft-model-path", "--speculative-draft-model", type=str, default=None,
      dest="speculative_draft_model_path")
    a("--speculative-draft-model-revision", type=str, default=None)
    a("--speculative-draft-load-format", type=str, default=None)
    a("--speculative-num-steps", type=int, default=None)
    a("--speculative-eagle-topk", type=int, default=None)
    a("--speculative-num-draft-tokens", type=int, default=None)
    a("--speculative-accept-threshold-single", type=float, default=1.0)
    a("--speculative-accept-threshold-acc", type=float, default=1.0)
    a("--speculative-token-map", type=str, default=None)
    a("--speculative-attention-mode", type=str, default="prefill", choices=["prefill", "decode"])
    a("--speculative-draft-attention-backend", type=str, default=None, choices=DRAFT_ATTN)
    a("--disable-radix-cache", action="store_true")
    a("--disable-custom-all-reduce", action="store_true")
    a("--disable-overlap-schedule", action="store_true")
    a("--enable-torch-compile", action="store_true")
    a("--torch-compile-max-bs", type=int, default=32)
    a("--enable-dp-attention", action="store_true")
    a("--enable-symm-mem", action="store_true")
    a("--enable-nccl-nvls", action="store_true")
    a("--skip-server-warmup", action="store_true")
    a("--watchdog-timeout", type=float, default=300)
    a("--tool-call-parser", type=str, default=None)
    a("--reasoning-parser", type=str, default=None)
    a("--chat-template", type=str, default=None)
    a("--stream-interval", type=int, default=1)
    a("--cuda-graph-bs", type=int, nargs="+", default=None)
    if new:
        a("--disable-cuda-graph", action=_DeprecatedStoreTrue)
        a("--disable-decode-cuda-graph", action="store_true")
        a("--disable-prefill-cuda-graph", action="store_true")
        a("--cuda-graph-max-bs-decode", type=int, default=None)
        a("--cuda-graph-max-bs-prefill", type=int, default=None)
        a("--cuda-graph-backend-decode", type=str, default="full", choices=["full", "breakable", "disabled"])
        a("--cuda-graph-backend-prefill", type=str, default="full", choices=["full", "breakable", "disabled"])
        if measured_0517(version):  # still accepted, with a warning (the real 0.5.17 log)
            a("--cuda-graph-max-bs", type=int, default=None, dest="deprecated_cuda_graph_max_bs")
    else:
        a("--disable-cuda-graph", action="store_true")
        a("--disable-cuda-graph-padding", action="store_true")
        a("--cuda-graph-max-bs", type=int, default=None)
    return p


_AUTO_SPEC = {"LlamaForCausalLM": (5, 4, 8), "Grok1ForCausalLM": (5, 4, 8)}


def resolve(ns: argparse.Namespace, version: str, architecture: str, gpu_mem_gb: float) -> tuple[dict, list[str]]:
    """Resolved args (like ServerArgs after __post_init__) plus the warnings SGLang would log."""
    args = dict(vars(ns))
    warnings: list[str] = []
    new = not version.startswith("0.5.9")
    if new and args.get("cuda_graph_backend_decode") == "disabled":
        args["disable_cuda_graph"] = True
    if new and args.get("disable_decode_cuda_graph"):
        args["disable_cuda_graph"] = True
    if args.pop("deprecated_cuda_graph_max_bs", None) is not None:
        args["cuda_graph_max_bs_decode"] = args["cuda_graph_max_bs_decode"] or ns.deprecated_cuda_graph_max_bs
        warnings.append("\x1b[1;33m'--cuda-graph-max-bs' is deprecated and will be removed in a future release. "
                        "Use '--cuda-graph-max-bs-decode' instead.\x1b[0m")
    if args.get("speculative_algorithm"):
        args["speculative_algorithm"] = args["speculative_algorithm"].upper()
        if args["speculative_algorithm"] == "NEXTN":
            args["speculative_algorithm"] = "EAGLE"
        if args["speculative_num_steps"] is None:
            steps, topk, ndraft = _AUTO_SPEC.get(architecture, (3, 1, 4))
            args["speculative_num_steps"] = steps
            args["speculative_eagle_topk"] = args["speculative_eagle_topk"] or topk
            args["speculative_num_draft_tokens"] = args["speculative_num_draft_tokens"] or ndraft
        if args.get("speculative_eagle_topk") is None:
            args["speculative_eagle_topk"] = 1
        steps = args["speculative_num_steps"]
        if args["speculative_eagle_topk"] == 1 and args.get("speculative_num_draft_tokens") != steps + 1:
            warnings.append("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                            "speculative_eagle_topk == 1")
            args["speculative_num_draft_tokens"] = steps + 1
        if args["max_running_requests"] is None:
            args["max_running_requests"] = 48
            warnings.append("Max running requests is reset to 48 for speculative decoding.")
        if not new:
            args["disable_overlap_schedule"] = True
            warnings.append("Overlap scheduler is disabled when spec v2 is off or using unsupported "
                            "speculative algorithm.")
    if args.get("attention_backend") is None:
        args["attention_backend"] = "triton"
        warnings.append("Attention backend not specified. Use triton backend by default.")
    if args.get("mem_fraction_static") is None:
        args["mem_fraction_static"] = round((gpu_mem_gb - 10.0) / gpu_mem_gb, 3)
    graph_key = "cuda_graph_max_bs_decode" if new else "cuda_graph_max_bs"
    if args.get(graph_key) is None:
        args[graph_key] = min(48, args["max_running_requests"] or 512) if args.get("speculative_algorithm") \
            else (512 if (args["tp_size"] or 1) >= 4 else 256)
    if args.get("served_model_name") is None:
        args["served_model_name"] = args["model_path"]
    if args.get("tokenizer_path") is None:
        args["tokenizer_path"] = args["model_path"]
    if args.get("chunked_prefill_size") is None:
        args["chunked_prefill_size"] = 8192
    if args.get("random_seed") is None:
        import random

        args["random_seed"] = random.randint(0, 1 << 30)
    args["device"] = "cuda"
    return args, warnings


def parse_server_args(argv: list[str], version: str, prog: str) -> argparse.Namespace:
    """Parse like SGLang: unknown or ambiguous flags exit 2 with argparse's usage message."""
    return build_parser(version, prog).parse_args(argv)
