"""How far vLLM 0.26's start-up for the stories' server goes on a machine without a GPU (run by prove_on_cpu.sh).

Runs in a venv laid out as the lent image (torch 2.11.0, the image's packages) plus the wheelhouse, with this
folder on PYTHONPATH (sitecustomize.py: CUDA-only extensions stubbed only where the driver is missing; CudaPlatform
named as the platform). Checks, each recorded in the JSON report even when it fails:
  1. `vllm serve --help` runs (the console script, a subprocess);
  2. vLLM's own CLI parser accepts each story's launch line (`--speculative-config` JSON, `--load-format dummy`,
     `--enforce-eager`, `--profiler-config`) and `vllm serve`'s own validation passes;
  3. the engine config is built from it (`EngineArgs.create_engine_config`, where a GPU is first needed, if at all);
  4. the modules a dense Llama target + EAGLE-3 drafter with TRITON_ATTN imports at start-up import;
  5. every third-party distribution those imports loaded is either in the image's package list or in the
     wheelhouse: the ones that are in neither would stop the first real start.
Usage: python check.py MODELS_DIR IMAGE_PACKAGES_TXT WHEELHOUSE_DIR REPORT_JSON
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from launch import launch_argv  # noqa: E402  (the stories' own launch lines: benchmarks/real_vllm/launch.py)

MODULES = [
    "vllm.entrypoints.cli.main", "vllm.entrypoints.openai.api_server", "vllm.v1.engine.async_llm",
    "vllm.v1.engine.core", "vllm.v1.executor.uniproc_executor", "vllm.v1.executor.multiproc_executor",
    "vllm.v1.worker.gpu_worker", "vllm.v1.worker.gpu_model_runner", "vllm.model_executor.models.llama",
    "vllm.model_executor.models.llama_eagle3", "vllm.v1.spec_decode.eagle", "vllm.v1.sample.rejection_sampler",
    "vllm.v1.attention.backends.triton_attn", "vllm.v1.attention.backends.fa_utils", "vllm.vllm_flash_attn",
    "vllm.model_executor.model_loader.dummy_loader", "vllm.entrypoints.serve.profile.api_router",
    "vllm.v1.metrics.loggers", "vllm.profiler.wrapper",
]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def step(report: dict, name: str, fn) -> object:
    t0 = time.monotonic()
    try:
        out = fn()
        report[name] = {"ok": True, "s": round(time.monotonic() - t0, 1), **(out if isinstance(out, dict) else {})}
        return out
    except BaseException as exc:  # noqa: BLE001 - every failure is the finding
        report[name] = {"ok": False, "s": round(time.monotonic() - t0, 1), "error": f"{type(exc).__name__}: {exc}"[:600],
                        "where": traceback.format_exc().splitlines()[-6:]}
        return None


def serve_help() -> dict:
    exe = Path(sys.executable).parent / "vllm"
    res = subprocess.run([str(exe), "serve", "--help"], capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"rc {res.returncode}: {res.stderr[-1500:]}")
    return {"lines": len(res.stdout.splitlines()),
            "flags_seen": [f for f in ("--speculative-config", "--load-format", "--enforce-eager",
                                       "--profiler-config", "--attention-backend") if f in res.stdout]}


def parse(argv: list[str]):
    """What `vllm serve` does before it dispatches: vLLM's CLI parser, then the serve subcommand's validate."""
    import vllm.entrypoints.cli.serve as serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    cmds = {}
    for cmd in serve.cmd_init():
        cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
        cmds[cmd.name] = cmd
    args = parser.parse_args(argv)
    cmds[args.subparser].validate(args)
    if getattr(args, "model_tag", None) is not None:  # what ServeSubcommand.cmd does first (cli/serve.py:52)
        args.model = args.model_tag
    return args


def engine_config(args) -> dict:
    from vllm.engine.arg_utils import AsyncEngineArgs

    cfg = AsyncEngineArgs.from_cli_args(args).create_engine_config()
    spec = cfg.speculative_config
    return {"speculative": {"method": spec.method, "k": spec.num_speculative_tokens,
                            "rejection_sample_method": getattr(spec, "rejection_sample_method", None)} if spec else None,
            "enforce_eager": cfg.model_config.enforce_eager, "compilation_mode": str(cfg.compilation_config.mode)}


def loaded_distributions() -> dict[str, list[str]]:
    """Top-level modules now imported -> the distributions that provide them (third-party only)."""
    import importlib.metadata as md

    owners = md.packages_distributions()
    stdlib = set(sys.stdlib_module_names)
    out: dict[str, list[str]] = {}
    for mod in sorted({m.split(".")[0] for m in list(sys.modules)}):
        if mod in stdlib or mod.startswith("_") or mod in ("sitecustomize", "launch", "check"):
            continue
        m = sys.modules.get(mod)
        where = [getattr(m, "__file__", None) or "", *(getattr(m, "__path__", None) or [])]
        if any("/_vendor/" in str(w) for w in where):
            continue  # a package's vendored copy (setuptools' jaraco, more_itertools): comes with its package
        out[mod] = sorted({norm(d) for d in owners.get(mod, [])})
    return out


def main() -> None:
    models, image_txt, wheelhouse, report_path = (Path(a) for a in sys.argv[1:5])
    stub_log = Path(os.environ["VLLM_CPU_CHECK_STUBBED"])
    report: dict = {"python": sys.version.split()[0]}
    import torch

    report["torch"] = torch.__version__
    step(report, "serve_help", serve_help)
    report["launch_lines"] = {}
    for story in ("no-regression", "launch-flag"):
        argv = launch_argv(models=str(models), port=30000, prof_dir="/tmp/vllm-prof",
                           extra=["--enforce-eager"] if story == "launch-flag" else [])
        entry: dict = {"line": shlex.join(argv)}
        args = step(entry, "parse", lambda a=argv: parse(a[1:]))  # argv[0] is the console script
        if args is not None:
            step(entry, "engine_config", lambda a=args: engine_config(a))
        report["launch_lines"][story] = entry
    report["imports"] = {}
    for mod in MODULES:
        step(report["imports"], mod, lambda m=mod: __import__(m) and {})
    image = {norm(line.strip()) for line in image_txt.read_text().splitlines()
             if line.strip() and not line.startswith("#")}
    carried = {norm(w.name.split("-")[0]) for w in wheelhouse.rglob("*.whl")}
    dists = loaded_distributions()
    report["third_party"] = {m: d for m, d in dists.items()}
    report["in_neither"] = sorted({m for m, d in dists.items()
                                   if d and not ({*d} & (image | carried)) and m != "vllm"})
    report["unowned_modules"] = sorted(m for m, d in dists.items() if not d)
    report["carried_but_not_imported"] = sorted(carried - {x for d in dists.values() for x in d} - {"vllm"})
    report["stubbed"] = [line.split("\t") for line in stub_log.read_text().splitlines()] if stub_log.exists() else []
    report_path.write_text(json.dumps(report, indent=1))
    fails = [k for k, v in report["imports"].items() if not v["ok"]]
    # What only a GPU gets past: the driver (torch.cuda's lazy init) and the kernel library's ops, which need
    # libcuda.so.1 to load (`torch.ops._C.<op>` is then missing). Anything else — a missing package above all — is
    # what the first real start would trip on.
    boundary = ("Found no NVIDIA driver", "'_OpNamespace' '_C' object has no attribute", "libcuda.so")
    report["blocking"] = sorted(
        [k for k in fails if not any(b in report["imports"][k]["error"] for b in boundary)]
        + [f"parse:{k}" for k, v in report["launch_lines"].items() if not v.get("parse", {}).get("ok")]
        + ([] if report["serve_help"]["ok"] else ["serve --help"]) + [f"missing:{m}" for m in report["in_neither"]])
    report_path.write_text(json.dumps(report, indent=1))
    print(json.dumps({"blocking": report["blocking"], "serve_help": report["serve_help"]["ok"], "import_failures": fails,
                      "parse": {k: v.get("parse", {}).get("ok") for k, v in report["launch_lines"].items()},
                      "engine_config": {k: v.get("engine_config", {}).get("ok")
                                        for k, v in report["launch_lines"].items()},
                      "in_neither": report["in_neither"], "stubbed": report["stubbed"]}, indent=1))
    sys.exit(1 if report["blocking"] else 0)


if __name__ == "__main__":
    main()
