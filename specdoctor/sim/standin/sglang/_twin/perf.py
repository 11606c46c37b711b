"""The twin's performance model: step times from the working tree, the worker's env and the launch flags.

Pure stdlib and side-effect free: the stand-in server evaluates it inside the TP0 worker process, and
specdoctor's own tests import the same file to predict what a scenario should measure.
"""

from __future__ import annotations

import math
import os

__all__ = [
    "accept_length",
    "alpha_for_accept_length",
    "allreduce_us",
    "effective_nccl_env",
    "evaluate",
    "expected_tps",
    "patch_present",
    "read_nccl_conf",
]


def accept_length(alpha: float, k: int) -> float:
    """Mean tokens per verify (bonus included) for per-token acceptance alpha and k drafted tokens."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def alpha_for_accept_length(tau: float, k: int) -> float:
    """Inverse of accept_length by bisection (tau is clamped to [1, k+1])."""
    tau = min(max(tau, 1.0), float(k + 1))
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if accept_length(mid, k) < tau:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def read_nccl_conf(path: str | None) -> dict[str, str]:
    """NCCL's config file format: KEY=VALUE lines, '#' comments."""
    out: dict[str, str] = {}
    if not path:
        return out
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.split("#", 1)[0].strip()
                if "=" in line:
                    key, _, value = line.partition("=")
                    out[key.strip()] = value.strip()
    except OSError:
        pass
    return out


def effective_nccl_env(environ: dict[str, str], default_conf: str | None = None) -> dict[str, str]:
    """NCCL reads NCCL_CONF_FILE (else /etc/nccl.conf, here the sandbox's) and lets the env win."""
    conf = read_nccl_conf(environ.get("NCCL_CONF_FILE") or default_conf)
    merged = dict(conf)
    merged.update({k: v for k, v in environ.items() if k.startswith("NCCL_")})
    return merged


def _protocols_allowed(model: dict, value: str | None) -> list[str]:
    names = list(model["protocols"])
    if not value:
        default = model.get("default_protocol", "auto")
        return names if default == "auto" else [default]
    value = value.strip()
    if value.startswith("^"):
        banned = {v.strip().lower() for v in value[1:].split(",")}
        allowed = [n for n in names if n.lower() not in banned]
    else:
        wanted = {v.strip().lower() for v in value.split(",")}
        allowed = [n for n in names if n.lower() in wanted]
    return allowed or names


def allreduce_us(model: dict, env: dict[str, str], nbytes: int, nranks: int, full_ranks: int) -> float:
    """All-reduce latency in microseconds: base + bytes*2(n-1)/n / busbw, under this NCCL env."""
    if nranks <= 1:
        return 2.0 + nbytes / 400e3
    base_factor = 1.0
    bw_factor = 1.0
    for var, table in (model.get("factors") or {}).items():
        value = env.get(var)
        if value is None:
            continue
        f = table.get(value) or table.get(value.upper()) or table.get(value.lower())
        if f:
            base_factor *= float(f.get("base", 1.0))
            bw_factor *= float(f.get("bw", 1.0))
    scale_n = 0.5 + 0.5 * (nranks - 1) / max(full_ranks - 1, 1)
    best = math.inf
    for name in _protocols_allowed(model, env.get("NCCL_PROTO")):
        p = model["protocols"][name]
        busbw = float(p["busbw_gbs"]) * bw_factor
        t = float(p["base_us"]) * base_factor * scale_n + nbytes * 2 * (nranks - 1) / nranks / (busbw * 1e3)
        best = min(best, t)
    if not env.get("NCCL_PROTO"):
        best *= float(model.get("auto_overhead", 1.0))
    return best


def patch_present(repo: str, patch: dict) -> bool:
    """A patch is present when every non-blank line it adds is in the file (whitespace-trimmed)."""
    try:
        with open(os.path.join(repo, patch["file"]), encoding="utf-8") as fh:
            lines = {ln.strip() for ln in fh}
    except OSError:
        return False
    wanted = [ln.strip() for ln in patch["add"].splitlines() if ln.strip()]
    return bool(wanted) and all(ln in lines for ln in wanted)


def _env_matches(cond: dict, value: str | None) -> bool:
    v = value if value is not None else ""
    if "set" in cond and cond["set"] is not None and bool(cond["set"]) != (value is not None):
        return False
    if cond.get("equals") is not None and v != cond["equals"]:
        return False
    if cond.get("in") is not None and v not in cond["in"]:
        return False
    if cond.get("not_in") is not None and v in cond["not_in"]:
        return False
    return True


def _effect_applies(when: dict, present: set[str], env: dict[str, str], args: dict) -> bool:
    if any(p not in present for p in when.get("patches") or []):
        return False
    if any(p in present for p in when.get("patches_absent") or []):
        return False
    for name, cond in (when.get("env") or {}).items():
        if not _env_matches(cond, env.get(name)):
            return False
    for name, want in (when.get("args") or {}).items():
        got = args.get(name)
        if isinstance(want, list):
            if got not in want:
                return False
        elif got != want:
            return False
    if when.get("speculative") is not None and bool(when["speculative"]) != bool(args.get("speculative_algorithm")):
        return False
    return True


def evaluate(twin: dict, environ: dict[str, str], args: dict, present: set[str]) -> dict:
    """Step times (ms), acceptance and graph flags for one launch, as the TP0 worker sees the world.

    The scenario's decode/verify numbers hold at its reference NCCL env; any other effective NCCL env
    shifts them by (calls per forward) x (all-reduce latency difference), so the server and the stand-in
    nccl-tests agree. Effects then add/scale times when their patches, env values and flags match.
    """
    perf = twin["perf"]
    ar = twin["allreduce"]
    n_gpus = int(twin["hardware"]["gpu_count"])
    tp = int(args.get("tp_size") or 1)
    hidden = int(twin["server"].get("hidden_size") or 7168)
    calls = int(perf.get("allreduce_per_forward", 0))
    env = effective_nccl_env(environ, twin.get("nccl_conf_default"))
    ref_env = dict(perf.get("reference_env") or {})

    def comm_delta_ms(tokens: int) -> float:
        nbytes = tokens * hidden * 2
        now = allreduce_us(ar, env, nbytes, tp, n_gpus)
        ref = allreduce_us(ar, ref_env, nbytes, tp, n_gpus)
        return calls * (now - ref) / 1000.0

    spec = bool(args.get("speculative_algorithm"))
    k = int(args.get("speculative_num_steps") or 0)
    ndraft = int(args.get("speculative_num_draft_tokens") or (k + 1))
    graphs = not args.get("disable_cuda_graph")
    t_decode = float(perf["decode_ms"]) + comm_delta_ms(1)
    if not graphs:
        t_decode *= float(perf.get("no_cuda_graph_factor", 1.3))
    t_verify = float(perf["verify_ms_base"]) + float(perf["verify_ms_per_token"]) * ndraft
    t_verify += comm_delta_ms(ndraft)
    verify_graph = bool(perf.get("verify_cuda_graph", True)) and graphs
    t_draft = float(perf["draft_ms_per_step"])
    alpha = float(perf["alpha"])
    applied = []
    cond_env = dict(environ)
    cond_env.update(env)
    for eff in perf.get("effects") or []:
        if not _effect_applies(eff.get("when") or {}, present, cond_env, args):
            continue
        applied.append(eff["id"])
        scale = float(eff.get("scale", 1.0))
        t_decode = (t_decode + float(eff.get("decode_ms", 0.0))) * scale
        t_verify = (t_verify + float(eff.get("verify_ms", 0.0))) * scale
        t_draft = t_draft + float(eff.get("draft_ms", 0.0))
        alpha = min(max(alpha + float(eff.get("alpha_delta", 0.0)), 0.0), 0.999)
    forced = None
    raw = environ.get("SGLANG_SIMULATE_ACC_LEN")
    if raw:
        try:
            val = float(raw)
            if val > 0:
                forced = val
        except ValueError:
            forced = None
    if spec and forced is not None:
        alpha = alpha_for_accept_length(forced, max(ndraft - 1, 1))
    return {
        "speculative": spec,
        "t_decode_ms": t_decode,
        "t_verify_ms": t_verify,
        "t_draft_ms": t_draft,
        "k": k,
        "draft_tokens": ndraft,
        "alpha": alpha,
        "forced_accept_length": forced,
        "expected_accept_length": accept_length(alpha, max(ndraft - 1, 0)) if spec else 1.0,
        "decode_cuda_graph": graphs,
        "verify_cuda_graph": verify_graph,
        "cv": float(perf.get("cv", 0.02)),
        "drift_amplitude": float((perf.get("drift") or {}).get("amplitude", 0.0)),
        "drift_period_s": float((perf.get("drift") or {}).get("period_s", 600.0)),
        "prefill_ms": float(perf.get("prefill_ms", 20.0)),
        "prefill_ms_per_token": float(perf.get("prefill_ms_per_token", 0.02)),
        "effects": applied,
        "present_patches": sorted(present),
        "nccl_env": env,
    }


def expected_tps(result: dict) -> float:
    """Steady-state tok/s the model implies (no noise, no prefill)."""
    if result["speculative"]:
        cycle = result["k"] * result["t_draft_ms"] + result["t_verify_ms"]
        return result["expected_accept_length"] / cycle * 1000.0
    return 1000.0 / result["t_decode_ms"]
