"""The twin's performance model: step times from the working tree, the worker's env and the launch flags.

Pure stdlib and side-effect free: the stand-in server evaluates it inside the TP0 worker process, and
specdoctor's own tests import the same file to predict what a scenario should measure.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

__all__ = [
    "LANE_GBS",
    "ClockState",
    "clock_state",
    "accept_length",
    "alpha_for_request",
    "alpha_for_accept_length",
    "allreduce_us",
    "clock_factor",
    "effective_nccl_env",
    "evaluate",
    "expected_tps",
    "gpus_for",
    "link_bw_factor",
    "live_contention",
    "patch_present",
    "read_nccl_conf",
    "step_ms_at",
]

# Usable bandwidth per PCIe lane in GB/s (gen1/2 use 8b/10b encoding, gen3+ 128b/130b).
LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


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
    """The NCCL_* settings NCCL runs with, read as its initEnv does (src/misc/param.cc): the file NCCL_CONF_FILE
    names (else ~/.nccl.conf), then /etc/nccl.conf (here `default_conf`, the sandbox's) — always read — each line
    set only when not already set, so the environment wins over both files and the first file over the second."""
    merged = {k: v for k, v in environ.items() if k.startswith("NCCL_")}
    user = environ.get("NCCL_CONF_FILE")
    home = environ.get("HOME")
    files = [user] if user else ([os.path.join(home, ".nccl.conf")] if home else [])
    for path in [*files, default_conf]:
        for key, value in read_nccl_conf(path).items():
            merged.setdefault(key, value)
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


def gpus_for(hw: dict, environ: dict[str, str], n: int, base_gpu_id: int = 0) -> list[int]:
    """Physical GPU indices of ranks 0..n-1: CUDA_VISIBLE_DEVICES (if set) then --base-gpu-id, like CUDA/SGLang."""
    visible = list(range(int(hw["gpu_count"])))
    raw = (environ.get("CUDA_VISIBLE_DEVICES") or "").strip()
    if raw:
        try:
            visible = [int(x) for x in raw.split(",") if x.strip()]
        except ValueError:
            pass
    picked = visible[base_gpu_id:base_gpu_id + n]
    return picked or [0]


def link_bw_factor(hw: dict, gpus: list[int]) -> float:
    """Bus-bandwidth factor of a PCIe box: the slowest link among `gpus` relative to its own full width/gen.

    A ring all-reduce moves every byte through every rank, so the slowest link sets the pace. On an
    NVLink box the collectives do not cross PCIe and the factor is 1.
    """
    if hw.get("interconnect", "pcie") != "pcie":
        return 1.0
    links = hw.get("pcie_per_gpu") or {}
    worst = 1.0
    for g in gpus:
        link = links.get(str(g)) or hw.get("pcie") or {}
        full = LANE_GBS.get(int(link.get("gen_max", 5)), 3.938) * int(link.get("width_max", 16))
        now = LANE_GBS.get(int(link.get("gen_current", 5)), 3.938) * int(link.get("width_current", 16))
        worst = min(worst, now / full if full > 0 else 1.0)
    return worst


@dataclass(frozen=True)
class ClockState:
    """One busy GPU's clocks and power as the driver sets them, with the clock-event reasons that hold them.

    `boost_mhz` is what the card sustains on its own under this load (a datacenter part holds its max; a
    consumer/workstation part settles below "max" with no event reason); application clocks (`-ac`) or locked
    clocks (`-lgc`) set below it cap it (the 'Applications Clocks Setting' reason); a power limit below the draw
    the workload needs at that clock lowers it further (dynamic power ~ f^2: f x sqrt(limit / needed)) and the
    draw then sits at the cap ('SW Power Cap').
    """

    sm_mhz: float
    boost_mhz: float
    power_w: float
    app_clocks_active: bool
    power_cap_active: bool


def clock_state(hw: dict) -> ClockState:
    """The SM clock, power draw and active reasons of a GPU under this scenario's load."""
    boost = float(hw.get("clocks_sm_mhz") or 1.0)
    default = float(hw.get("power_default_w") or hw.get("power_limit_w") or 1.0)
    needed = float(hw.get("load_power_w") or 0.55 * default)  # at the boost clock
    limit = float(hw.get("power_limit_w") or default)
    app = hw.get("applications_clocks_mhz")
    sm = boost
    app_active = False
    if app is not None and float(app) < boost:
        sm, app_active = float(app), True
    need_here = needed * (sm / boost) ** 2
    cap_active = limit < need_here
    if cap_active:
        sm = boost * math.sqrt(limit / needed)
        app_active = False  # the power cap, not the setting, is what holds the clock now
    return ClockState(sm_mhz=sm, boost_mhz=boost, power_w=min(limit, need_here), app_clocks_active=app_active,
                      power_cap_active=cap_active)


def effective_sm_mhz(hw: dict) -> float:
    """SM clock under load: the card's own sustained clock, capped by application/locked clocks and the power cap."""
    return clock_state(hw).sm_mhz


def clock_factor(hw: dict, compute_fraction: float) -> float:
    """Step-time multiplier from clocks: the compute-bound share follows the SM clock (relative to the clock the card
    sustains on its own, at which the scenario's step times are given), the rest the memory clock."""
    boost = float(hw.get("clocks_sm_mhz") or 1.0)
    mem = float(hw.get("clocks_mem_mhz") or 1.0)
    mem_max = float(hw.get("clocks_mem_max_mhz") or mem)
    sm = effective_sm_mhz(hw)
    return compute_fraction * boost / max(sm, 1.0) + (1 - compute_fraction) * mem_max / max(mem, 1.0)


def live_contention(root: str | None, twin: dict) -> dict[int, float]:
    """SM share taken by other (non-SGLang) processes per GPU, counting only those still alive."""
    out: dict[int, float] = {}
    for proc in twin.get("gpu_processes") or []:
        pid_file = os.path.join(root, "run", "gpu-procs", f"{proc['id']}.pid") if root else None
        if pid_file is not None:
            try:
                with open(pid_file, encoding="utf-8") as fh:
                    pid = int(fh.read().strip())
                with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                    if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                        continue
            except (OSError, ValueError, IndexError):
                continue
        for g in proc.get("gpus") or []:
            out[int(g)] = min(out.get(int(g), 0.0) + float(proc.get("sm_share", 0.0)), 0.95)
    return out


def allreduce_us(model: dict, env: dict[str, str], nbytes: int, nranks: int, full_ranks: int,
                 link: float = 1.0) -> float:
    """All-reduce latency in microseconds: base + bytes*2(n-1)/n / busbw, under this NCCL env.

    `link` scales the bus bandwidth (a PCIe link trained down to a lower gen or width).
    """
    if nranks <= 1:
        return 2.0 + nbytes / 400e3
    base_factor = 1.0
    bw_factor = max(link, 1e-3)
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


def _effect_applies(when: dict, present: set[str], env: dict[str, str], args: dict, versions: dict) -> bool:
    if any(p not in present for p in when.get("patches") or []):
        return False
    if any(p in present for p in when.get("patches_absent") or []):
        return False
    for name, cond in (when.get("env") or {}).items():
        if not _env_matches(cond, env.get(name)):
            return False
    for name, want in (when.get("versions") or {}).items():
        got = versions.get(name)
        if (isinstance(want, list) and got not in want) or (not isinstance(want, list) and got != want):
            return False
    for name, want in (when.get("args") or {}).items():
        got = args.get(name)
        if isinstance(got, str) and name.endswith("_path"):
            got = os.path.normpath(got)
            want = [os.path.normpath(w) for w in want] if isinstance(want, list) else os.path.normpath(str(want))
        if isinstance(want, list):
            if got not in want:
                return False
        elif got != want:
            return False
    if when.get("speculative") is not None and bool(when["speculative"]) != bool(args.get("speculative_algorithm")):
        return False
    return True


def _versions(twin: dict) -> dict[str, str]:
    hw = twin["hardware"]
    return {"sglang": twin.get("version", ""), "driver": hw.get("driver", ""), "cuda": hw.get("cuda", ""),
            "nccl": hw.get("nccl", ""), "torch": hw.get("torch", "")}


def _draft_alpha(twin: dict, draft: str | None, default: float) -> float:
    """Per-token acceptance of the draft the launch names (the scenario's table of draft dirs), else default."""
    if not draft:
        return default
    table = twin.get("drafts") or {}
    entry = table.get(os.path.normpath(draft))
    if entry is None:
        real = os.path.realpath(draft)
        entry = next((v for k, v in table.items() if os.path.realpath(k) == real), None)
    if entry is None or entry.get("alpha") is None:
        return default
    return float(entry["alpha"])


def evaluate(twin: dict, environ: dict[str, str], args: dict, present: set[str],
             contention: dict[int, float] | None = None) -> dict:
    """Step times (ms), acceptance and graph flags for one launch, as the TP0 worker sees the world.

    The scenario's decode/verify numbers hold at its reference NCCL env, full PCIe links, full clocks and
    idle GPUs; any other effective NCCL env or a down-trained link shifts them by (calls per forward) x
    (all-reduce latency difference), so the server and the stand-in nccl-tests agree. Locked clocks, a
    binding power cap and other processes sharing the server's GPUs scale them. Effects then add/scale
    times (and may switch a CUDA graph off) when their patches, env values, flags and versions match.
    """
    perf = twin["perf"]
    ar = twin["allreduce"]
    hw = twin["hardware"]
    n_gpus = int(hw["gpu_count"])
    tp = int(args.get("tp_size") or 1)
    gpus = gpus_for(hw, environ, tp, int(args.get("base_gpu_id") or 0))
    link = link_bw_factor(hw, gpus)
    hidden = int(twin["server"].get("hidden_size") or 7168)
    calls = int(perf.get("allreduce_per_forward", 0))
    env = effective_nccl_env(environ, twin.get("nccl_conf_default"))
    ref_env = dict(perf.get("reference_env") or {})

    def comm_delta_ms(tokens: int) -> float:
        nbytes = tokens * hidden * 2
        now = allreduce_us(ar, env, nbytes, tp, n_gpus, link)
        ref = allreduce_us(ar, ref_env, nbytes, tp, n_gpus)
        return calls * (now - ref) / 1000.0

    spec = bool(args.get("speculative_algorithm"))
    k = int(args.get("speculative_num_steps") or 0)
    ndraft = int(args.get("speculative_num_draft_tokens") or (k + 1))
    graphs = not args.get("disable_cuda_graph")
    hw_factor = clock_factor(hw, float(perf.get("compute_fraction", 0.3)))
    shares = [(contention or {}).get(g, 0.0) for g in gpus]
    # TP ranks wait for the slowest: a GPU time-sliced with another process stretches every step.
    hw_factor /= max(1.0 - max(shares or [0.0]), 0.05)
    t_decode = (float(perf["decode_ms"]) + comm_delta_ms(1)) * hw_factor
    no_graph = float(perf.get("no_cuda_graph_factor", 1.3))
    if not graphs:
        t_decode *= no_graph
    t_verify = float(perf["verify_ms_base"]) + float(perf["verify_ms_per_token"]) * ndraft
    t_verify = (t_verify + comm_delta_ms(ndraft)) * hw_factor
    verify_graph = bool(perf.get("verify_cuda_graph", True)) and graphs
    if not graphs and perf.get("verify_cuda_graph", True):
        t_verify *= no_graph  # the scenario's verify time was measured with its graph; eager costs the same factor
    decode_graph = graphs
    t_draft = float(perf["draft_ms_per_step"]) * hw_factor
    alpha = _draft_alpha(twin, args.get("speculative_draft_model_path"), float(perf["alpha"]))
    applied = []
    t_verify_host = 0.0
    t_draft_host = 0.0
    cond_env = dict(environ)
    cond_env.update(env)
    versions = _versions(twin)
    for eff in perf.get("effects") or []:
        if not _effect_applies(eff.get("when") or {}, present, cond_env, args, versions):
            continue
        applied.append(eff["id"])
        scale = float(eff.get("scale", 1.0))
        t_decode = (t_decode + float(eff.get("decode_ms", 0.0))) * scale
        t_verify = (t_verify + float(eff.get("verify_ms", 0.0))) * scale
        t_draft = t_draft + float(eff.get("draft_ms", 0.0))
        t_verify_host += float(eff.get("verify_host_ms", 0.0))
        t_draft_host += float(eff.get("draft_host_ms", 0.0))
        alpha = min(max(alpha + float(eff.get("alpha_delta", 0.0)), 0.0), 0.999)
        if eff.get("verify_cuda_graph") is False and verify_graph:
            verify_graph = False  # this tree's verify runs eager: the graph's launch savings are lost
            t_verify *= no_graph
        if eff.get("decode_cuda_graph") is False and decode_graph:
            decode_graph = False
            t_decode *= no_graph
    forced = None
    # SGLang forces it with a variable; vLLM 0.26 with speculative-config keys (synthetic rejection sampling).
    raw = environ.get("SGLANG_SIMULATE_ACC_LEN") or str(args.get("synthetic_acceptance_length") or "")
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
        # the cycle's wall time: the host stalls are part of it (carried on verify's term, split out by the profiler)
        "t_verify_ms": t_verify + t_verify_host + t_draft_host,
        "t_verify_host_ms": t_verify_host,  # of which host-only before verify (the GPU projection does not see it)
        "t_draft_host_ms": t_draft_host,  # and host-only at the start of the draft's range, before its first launch
        "t_draft_ms": t_draft,
        "k": k,
        "draft_tokens": ndraft,
        "alpha": alpha,
        "forced_accept_length": forced,
        "expected_accept_length": accept_length(alpha, max(ndraft - 1, 0)) if spec else 1.0,
        "decode_cuda_graph": decode_graph,
        "verify_cuda_graph": verify_graph,
        "cv": float(perf.get("cv", 0.02)),
        "drift_amplitude": float((perf.get("drift") or {}).get("amplitude", 0.0)),
        "drift_period_s": float((perf.get("drift") or {}).get("period_s", 600.0)),
        "warmup_requests": int((perf.get("warmup") or {}).get("requests", 0)),
        "warmup_factor": float((perf.get("warmup") or {}).get("factor", 1.0)),
        "slow_from_launch": int((perf.get("later_launches") or {}).get("from_launch", 0)),
        "slow_launch_factor": float((perf.get("later_launches") or {}).get("factor", 1.0)),
        "prefill_ms": float(perf.get("prefill_ms", 20.0)) * hw_factor,
        "prefill_ms_per_token": float(perf.get("prefill_ms_per_token", 0.02)) * hw_factor,
        "kv_ms_per_1k_tokens": float(perf.get("kv_ms_per_1k_tokens", 0.0)) * hw_factor,
        "alpha_per_temperature": float(perf.get("alpha_per_temperature", 0.0)),
        "prompt_kinds": list(perf.get("prompt_kinds") or []),
        "effects": applied,
        "present_patches": sorted(present),
        "nccl_env": env,
        "gpus": gpus,
        "link_factor": link,
        "hw_factor": hw_factor,
    }


def alpha_for_request(result: dict, prompt: str, temperature: float) -> float:
    """Acceptance for one request: what is asked (prompt kind) and how it is sampled (temperature) move alpha."""
    if result.get("forced_accept_length") is not None:
        return float(result["alpha"])
    alpha = float(result["alpha"]) + float(result.get("alpha_per_temperature", 0.0)) * max(temperature, 0.0)
    low = prompt.lower()
    for kind in result.get("prompt_kinds") or []:
        if any(m.lower() in low for m in kind.get("contains") or []):
            alpha += float(kind.get("alpha_delta", 0.0))
            break
    return min(max(alpha, 0.0), 0.999)


def step_ms_at(result: dict, context_tokens: int) -> float:
    """One decode step (or one draft+verify cycle) at this context length: KV-cache reads grow with it."""
    kv = float(result.get("kv_ms_per_1k_tokens", 0.0)) * context_tokens / 1000.0
    if result["speculative"]:
        return result["k"] * result["t_draft_ms"] + result["t_verify_ms"] + kv
    return result["t_decode_ms"] + kv


def expected_tps(result: dict, prompt_tokens: int = 0, output_tokens: int = 0, *, prompt: str = "",
                 temperature: float = 0.0) -> float:
    """Steady-state tok/s the model implies (no noise, no prefill) at a workload (default: empty context)."""
    context = prompt_tokens + output_tokens // 2
    if result["speculative"]:
        alpha = alpha_for_request(result, prompt, temperature)
        tau = accept_length(alpha, max(result["draft_tokens"] - 1, 0))
        return tau / step_ms_at(result, context) * 1000.0
    return 1000.0 / step_ms_at(result, context)
