"""Checks specdoctor's break-even model against a real draft → verify → accept loop timed on the GPU.

Why: `specdoctor.tools.breakeven.breakeven` predicts speculative tok/s as τ / (k·t_draft + t_verify + overhead). Here a
~1 B Llama-like target and a 1-layer draft head (benchmarks/spec_model.py) run that loop for real (k draft
forwards, one (k+1)-token verify forward, KV-cache rewind to the accepted length, bonus token), with the accept
decision simulated by a seeded Bernoulli per draft position (like SGLang's SGLANG_SIMULATE_ACC_LEN) so that the
mean accept length τ hits chosen targets. Each phase is timed alone (CUDA events around CUDA-graph replays), the
loop is timed end to end, and the prediction from the phase times is compared with the measured tok/s.

    python benchmarks/spec_model_validation.py                      # GPU: ~1.1 B target, CUDA graphs
    python benchmarks/spec_model_validation.py --tiny --device cpu  # CPU: format and logic checks
Writes spec_validation.{csv,json,png} under $OUT (default benchmarks/results/h200/).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parent))  # spec_model.py sits beside this script
from spec_model import GPU_1B, KMAX, TINY, ModelConfig, SpecEngine  # noqa: E402

from specdoctor.tools.breakeven.breakeven import BreakevenInput, alpha_from_accept_length, analyze  # noqa: E402

__all__ = ["Phase", "Point", "Validation", "Runner", "draw_accepts", "self_check", "measure", "write", "main"]

_SPIN_CYCLES = 1_000_000  # ~0.5 ms busy kernel before each timed replay, so launch latency stays out of it


class Phase(BaseModel):
    """One step timed alone: median and spread of `reps` replays, ms."""

    name: str
    median_ms: float
    p10_ms: float
    p90_ms: float
    reps: int


class Point(BaseModel):
    """One (k, τ target, sync mode) point: measured loop vs the break-even model's prediction."""

    k: int
    tau_target: float
    alpha: float
    sync: bool = Field(description="True: the host reads the accept count after every cycle (as a server does).")
    tau_measured: float
    cycles: int
    tokens: int
    seconds: float
    measured_tps: float = Field(description="Median over the runs of tokens / seconds.")
    predicted_tps: float = Field(description="Median over the runs of the model's tok/s at that run's τ.")
    error_pct: float = Field(description="Median over the runs of (predicted − measured) / measured, %.")
    error_spread_pct: float = Field(description="max − min of the per-run errors, %: the run-to-run noise.")
    decode_ms: float
    draft_ms: float = Field(description="Mean draft step (first step over 2 tokens, then 1-token steps), ms.")
    verify_ms: float
    overhead_ms: float = Field(description="Accept/rewind step, plus the host round trip when sync.")
    tau_star: float
    baseline_tps: float


class Validation(BaseModel):
    """The whole run: configuration, phases, baselines, points and how far the model was off."""

    command: list[str]
    device: str
    dtype: str
    graphs: bool
    model: ModelConfig
    target_params: int
    draft_params: int
    prompt_tokens: int
    gen_tokens: int
    reps: int
    accept_mode: str
    phases: dict[str, Phase]
    host_overhead_ms: float = Field(description="Per-iteration host round trip: sync'd decode loop − decode step.")
    baseline_tps: dict[str, float] = Field(description="Plain-decode loop tok/s, per sync mode.")
    points: list[Point]
    worst_error_pct: dict[str, float]
    self_check: dict[str, str] = Field(default_factory=dict, description="Loop correctness checks on the device.")
    fingerprint: dict[str, str]
    seconds: float


def _cpu_clock() -> float:
    """On the CPU the work runs in this thread (1 torch thread): its CPU time ignores other processes' load."""
    return time.thread_time()


class Runner:
    """The engine's steps, as CUDA graphs (one per step) on a GPU or plain calls on the CPU, with a clock."""

    def __init__(self, eng: SpecEngine, graphs: bool):
        self.eng, self.cuda = eng, eng.device.type == "cuda"
        self.fns: dict[str, Callable[[], None]] = dict(eng.steps())
        if graphs:
            self._capture()

    def _capture(self) -> None:
        eng, fns = self.eng, self.fns
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for fn in fns.values():  # warm every shape first: kernel selection stays out of the capture
                for _ in range(3):
                    fn()
                eng.reset()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        pool = torch.cuda.graph_pool_handle()
        for name, fn in list(fns.items()):
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g, pool=pool):
                fn()
            fns[name] = g.replay
        eng.reset()
        torch.cuda.synchronize()

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def time_alone(self, name: str, reps: int) -> Phase:
        """Median time of one step, the state reset after each replay (the reset is not timed)."""
        fn, times = self.fns[name], []
        with torch.no_grad():
            self.eng.reset()
            for _ in range(3):
                fn()
                self.eng.reset()
            self.sync()
            if self.cuda:
                ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
                for s, e in ev:
                    torch.cuda._sleep(_SPIN_CYCLES)
                    s.record()
                    fn()
                    e.record()
                    self.eng.reset()
                torch.cuda.synchronize()
                times = [s.elapsed_time(e) for s, e in ev]
            else:
                for _ in range(reps):
                    t0 = _cpu_clock()
                    fn()
                    times.append((_cpu_clock() - t0) * 1e3)
                    self.eng.reset()
        a = np.array(times)
        return Phase(name=name, median_ms=float(np.median(a)), p10_ms=float(np.percentile(a, 10)),
                     p90_ms=float(np.percentile(a, 90)), reps=reps)

    def _clock(self, body: Callable[[], tuple[int, int]]) -> tuple[float, int, int]:
        self.sync()
        if self.cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            tokens, cycles = body()
            e.record()
            torch.cuda.synchronize()
            return s.elapsed_time(e) / 1e3, tokens, cycles
        t0 = _cpu_clock()
        tokens, cycles = body()
        return _cpu_clock() - t0, tokens, cycles

    def run_decode(self, tokens: int, sync: bool) -> tuple[float, int, int]:
        """Plain greedy decoding of `tokens` tokens; with sync the host reads each token (a server streams it)."""
        fn, eng = self.fns["decode"], self.eng

        def body() -> tuple[int, int]:
            for _ in range(tokens):
                fn()
                if sync:
                    eng.dec_tok.item()
            return tokens, tokens

        with torch.no_grad():
            eng.reset()
            return self._clock(body)

    def run_spec(self, k: int, gen: int, accepts: np.ndarray | None, sync: bool) -> tuple[float, int, int]:
        """Cycles of draft ×k → verify → accept until `gen` tokens are out; returns (seconds, tokens, cycles).

        With sync the host reads the accept count back after every cycle; without, it relies on the pre-drawn
        counts (simulated acceptance only) and the GPU runs the cycles back to back.
        """
        eng, f = self.eng, self.fns
        first, step, verify, accept = f["draft_first"], f["draft_step"], f[f"verify{k}"], f[f"accept{k}"]
        if not sync and accepts is None:
            raise ValueError("greedy acceptance needs sync: the host must read the accept count")

        def body() -> tuple[int, int]:
            out = cycles = 0
            while out < gen:
                first()
                for _ in range(k - 1):
                    step()
                verify()
                accept()
                out += int(eng.n_last.item()) + 1 if sync else int(accepts[cycles]) + 1  # type: ignore[index]
                cycles += 1
            return out, cycles

        with torch.no_grad():
            eng.reset()
            if accepts is not None:
                eng.accepts[: len(accepts)].copy_(torch.from_numpy(accepts).to(eng.accepts.device))
            self.sync()
            return self._clock(body)


def draw_accepts(alpha: float, k: int, cycles: int, rng: np.random.Generator) -> np.ndarray:
    """Accepted drafts per cycle: Bernoulli(α) per draft position, stopping at the first rejection (≤ k)."""
    ok = rng.random((cycles, k)) < alpha
    return np.cumprod(ok, axis=1).sum(axis=1).astype(np.int64)


def self_check(device: torch.device, graphs: bool) -> dict[str, str]:
    """Small fp32 model: the greedy spec loop must emit plain decoding's tokens, and graphs must match eager.

    Why: the CPU tests cannot run CUDA graphs; this runs the same index/rewind logic captured on the device.
    """
    cfg = ModelConfig(vocab=512, hidden=128, layers=2, heads=4, kv_heads=2, inter=256)
    out: dict[str, str] = {}

    def engine(mode: str) -> SpecEngine:
        eng = SpecEngine(cfg, max_len=128, max_out=64, max_cycles=80, dtype=torch.float32, device=device, seed=7,
                         accept_mode=mode)  # type: ignore[arg-type]
        eng.prefill(torch.randint(0, cfg.vocab, (16,), generator=torch.Generator().manual_seed(7)).to(device))
        return eng

    eng = engine("greedy")
    run = Runner(eng, graphs)
    run.run_decode(48, True)
    plain = eng.out[:48].tolist()
    for k in (1, 3, 5):
        run.run_spec(k, 48, None, True)
        got = eng.out[:48].tolist()
        bad = next((i for i, (a, b) in enumerate(zip(plain, got, strict=True)) if a != b), None)
        out[f"greedy_k{k}_equals_plain"] = "ok" if bad is None else f"MISMATCH at token {bad}"
    acc = draw_accepts(0.7, 4, 80, np.random.default_rng(3))
    toks = []
    for use_graphs in ({graphs, False} if graphs else {False}):
        e2 = engine("simulate")
        Runner(e2, use_graphs).run_spec(4, 48, acc, True)
        toks.append((e2.out[:48].tolist(), int(e2.pos), int(e2.out_len)))
    out["graphs_equal_eager"] = "ok" if all(t == toks[0] for t in toks) else "MISMATCH"
    return out


def _fingerprint(device: torch.device) -> dict[str, str]:
    """What the numbers were measured on: GPU, driver, topology, torch/CUDA/NCCL versions, environment."""
    fp = {"python": sys.version.split()[0], "platform": platform.platform(), "torch": torch.__version__,
          "cuda_runtime": str(torch.version.cuda), "cpu_count": str(os.cpu_count())}
    if device.type == "cuda":
        fp["gpu"] = torch.cuda.get_device_name(device)
        fp["capability"] = ".".join(map(str, torch.cuda.get_device_capability(device)))
        try:
            fp["nccl_torch"] = ".".join(map(str, torch.cuda.nccl.version()))
        except (AttributeError, RuntimeError) as exc:
            fp["nccl_torch"] = f"unavailable: {exc}"
    fp["env"] = "\n".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                          if k.startswith(("NCCL_", "CUDA_", "TORCH_", "PYTORCH_")))
    if shutil.which("nvidia-smi"):
        for key, argv in {"nvidia_smi_L": ["-L"], "nvidia_smi_q": ["-q"], "nvidia_smi_topo": ["topo", "-m"],
                          "nvidia_smi_query": ["--query-gpu=index,name,driver_version,memory.total,pci.bus_id,"
                                               "clocks.sm,clocks.max.sm,power.limit,pcie.link.gen.current,"
                                               "pcie.link.width.current", "--format=csv"]}.items():
            res = subprocess.run(["nvidia-smi", *argv], capture_output=True, text=True, timeout=60, check=False)
            fp[key] = res.stdout + (f"\n[stderr] {res.stderr}" if res.stderr.strip() else "")
    return fp


def _predict(k: int, tau: float, decode_ms: float, draft_ms: float, verify_ms: float, overhead_ms: float):
    return analyze(BreakevenInput(decode_ms=decode_ms, steps=k, draft_ms=draft_ms, verify_ms=verify_ms,
                                  overhead_ms=overhead_ms, accept_len=tau, max_steps=KMAX, target_speedups=[]))


def measure(args: argparse.Namespace) -> Validation:
    """Build, capture, time the phases, run the sweep; pure measurement (no files)."""
    t_start = time.perf_counter()
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)  # steadier CPU timings on a shared box (the CPU run checks logic, not speed)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64}[args.dtype]
    cfg = (TINY if args.tiny else GPU_1B).model_copy(update={k: v for k, v in {
        "layers": args.layers, "hidden": args.hidden, "inter": args.inter, "vocab": args.vocab}.items() if v})
    max_cycles = args.gen + 2
    max_len = -(-(args.prompt + args.gen + 2 * KMAX + 8) // 64) * 64  # aligned: attention kernels like it
    eng = SpecEngine(cfg, max_len=max_len, max_out=args.gen, max_cycles=max_cycles,
                     dtype=dtype, device=device, seed=args.seed, accept_mode=args.accept)
    gen = torch.Generator().manual_seed(args.seed)
    eng.prefill(torch.randint(0, cfg.vocab, (args.prompt,), generator=gen).to(device))
    graphs = args.graphs if args.graphs is not None else device.type == "cuda"
    checks = self_check(device, graphs)
    run = Runner(eng, graphs)
    ks = sorted({int(x) for x in args.ks.split(",")})
    if not ks or min(ks) < 1 or max(ks) > KMAX:
        raise SystemExit(f"--ks must lie in 1..{KMAX}")
    taus = sorted({float(x) for x in args.taus.split(",")})
    names = ["decode", "draft_first", "draft_step", *(f"verify{k}" for k in ks), *(f"accept{k}" for k in ks)]
    phases = {n: run.time_alone(n, args.phase_reps) for n in names}
    syncs = {"both": [True, False], "cycle": [True], "none": [False]}[args.sync]
    if args.accept == "greedy":
        syncs = [True]
    decode_loop: dict[bool, float] = {}
    for s in syncs:
        run.run_decode(min(16, args.gen), s)  # warm the loop itself
        secs = [run.run_decode(args.gen, s)[0] / args.gen for _ in range(args.reps)]
        decode_loop[s] = float(np.median(secs)) * 1e3
    host = max(0.0, decode_loop.get(True, phases["decode"].median_ms) - phases["decode"].median_ms)
    points: list[Point] = []
    rng = np.random.default_rng(args.seed)
    for k in ks:
        draft_ms = (phases["draft_first"].median_ms + (k - 1) * phases["draft_step"].median_ms) / k
        for tau in taus:
            if tau > k + 1 + 1e-9:
                continue
            alpha = alpha_from_accept_length(tau, k)
            for s in syncs:
                run.run_spec(k, min(16, args.gen), draw_accepts(alpha, k, max_cycles, rng), s)  # warm-up
                runs = []
                for _ in range(args.reps):
                    acc = draw_accepts(alpha, k, max_cycles, rng) if args.accept == "simulate" else None
                    runs.append(run.run_spec(k, args.gen, acc, s))
                overhead = phases[f"accept{k}"].median_ms + (host if s else 0.0)
                verify_ms = phases[f"verify{k}"].median_ms
                meas, pred, an = [], [], None
                for secs, tok, cyc in runs:  # the model predicts each run from that run's own τ
                    an = _predict(k, min(tok / cyc, k + 1.0), decode_loop[s], draft_ms, verify_ms, overhead)
                    meas.append(tok / secs)
                    pred.append(float(an.spec_tps or 0.0))
                assert an is not None
                err = [100.0 * (b - a) / a for a, b in zip(meas, pred, strict=True)]
                tot_tok, tot_cyc = sum(r[1] for r in runs), sum(r[2] for r in runs)
                points.append(Point(k=k, tau_target=tau, alpha=round(alpha, 5), sync=s,
                                    tau_measured=round(tot_tok / tot_cyc, 4), cycles=tot_cyc, tokens=tot_tok,
                                    seconds=round(sum(r[0] for r in runs), 6),
                                    measured_tps=round(float(np.median(meas)), 3),
                                    predicted_tps=round(float(np.median(pred)), 3),
                                    error_pct=round(float(np.median(err)), 3),
                                    error_spread_pct=round(max(err) - min(err), 3),
                                    decode_ms=round(decode_loop[s], 5), draft_ms=round(draft_ms, 5),
                                    verify_ms=round(verify_ms, 5), overhead_ms=round(overhead, 5),
                                    tau_star=an.tau_star, baseline_tps=an.baseline_tps))
    worst = {("sync" if s else "nosync"): max((abs(p.error_pct) for p in points if p.sync == s), default=0.0)
             for s in syncs}
    return Validation(command=[sys.executable, *sys.argv], device=str(device), dtype=args.dtype, graphs=graphs,
                      model=cfg, target_params=cfg.params(), draft_params=cfg.params(draft=True),
                      prompt_tokens=args.prompt, gen_tokens=args.gen, reps=args.reps, accept_mode=args.accept,
                      phases=phases, host_overhead_ms=round(host, 5),
                      baseline_tps={("sync" if s else "nosync"): round(1e3 / v, 3) for s, v in decode_loop.items()},
                      points=points, worst_error_pct=worst, self_check=checks, fingerprint=_fingerprint(device),
                      seconds=round(time.perf_counter() - t_start, 3))


def write(result: Validation, out: Path) -> list[Path]:
    """spec_validation.json (everything), .csv (the points) and .png (measured vs predicted)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "spec_validation.json", out / "spec_validation.csv", out / "spec_validation.png"]
    paths[0].write_text(result.model_dump_json(indent=2))
    fields = list(Point.model_fields)
    with paths[1].open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for p in result.points:
            w.writerow(p.model_dump())
    _plot(result, paths[2])
    return paths


def _plot(result: Validation, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5))
    pts = result.points
    if pts:
        hi = max(max(p.measured_tps for p in pts), max(p.predicted_tps for p in pts)) * 1.08
        xs = np.linspace(0, hi, 50)
        ax1.plot(xs, xs, "k-", lw=0.8)
        ax1.fill_between(xs, xs * 0.95, xs * 1.05, color="0.85", label="±5 %")
        for s, marker in ((True, "o"), (False, "s")):
            sel = [p for p in pts if p.sync == s]
            if sel:
                sc = ax1.scatter([p.measured_tps for p in sel], [p.predicted_tps for p in sel],
                                 c=[p.k for p in sel], cmap="viridis", vmin=1, vmax=KMAX, marker=marker,
                                 label="sync per cycle" if s else "no sync")
        fig.colorbar(sc, ax=ax1, label="k (draft steps)")
        ax1.set(xlim=(0, hi), ylim=(0, hi), xlabel="measured tok/s", ylabel="predicted tok/s (tools.breakeven)",
                title=f"worst error {', '.join(f'{k} {v:.1f} %' for k, v in result.worst_error_pct.items())}")
        ax1.legend(loc="upper left")
        mode = True if any(p.sync for p in pts) else False
        for k in sorted({p.k for p in pts}):
            sel = sorted((p for p in pts if p.k == k and p.sync == mode), key=lambda p: p.tau_measured)
            line = ax2.plot([p.tau_measured for p in sel], [p.predicted_tps for p in sel], "-", label=f"k={k}")
            ax2.plot([p.tau_measured for p in sel], [p.measured_tps for p in sel], "o", color=line[0].get_color())
        base = result.baseline_tps.get("sync" if mode else "nosync")
        if base:
            ax2.axhline(base, color="k", ls="--", lw=0.8, label="plain decode")
        ax2.set(xlabel="accept length τ (measured)", ylabel="tok/s", title="lines: model, dots: measured")
        ax2.legend()
    fig.suptitle(f"{result.fingerprint.get('gpu', result.device)}: {result.target_params / 1e6:.1f} M-parameter target, "
                 f"{result.dtype}, graphs={result.graphs}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="a 2-layer, 64-wide model (CPU tests)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32", "fp64"], default=None,
                   help="default bf16 on a GPU, fp32 on the CPU")
    p.add_argument("--graphs", action=argparse.BooleanOptionalAction, default=None,
                   help="capture each step in a CUDA graph (default: on a GPU)")
    for name in ("layers", "hidden", "inter", "vocab"):
        p.add_argument(f"--{name}", type=int, default=None, help=f"override the model's {name}")
    p.add_argument("--ks", default="1,2,3,4,5", help=f"draft steps k to run (1..{KMAX})")
    p.add_argument("--taus", default="1.5,2,2.5,3,4", help="target accept lengths τ (only τ ≤ k+1 run)")
    p.add_argument("--gen", type=int, default=256, help="tokens generated per run")
    p.add_argument("--prompt", type=int, default=128, help="prompt tokens (prefilled once)")
    p.add_argument("--reps", type=int, default=5, help="runs per point (pooled)")
    p.add_argument("--phase-reps", type=int, default=100, help="replays per phase timing")
    p.add_argument("--sync", choices=["both", "cycle", "none"], default="both",
                   help="host reads the accept count every cycle, never, or run both")
    p.add_argument("--accept", choices=["simulate", "greedy"], default="simulate",
                   help="Bernoulli acceptance hitting the τ targets, or real greedy matching (τ≈1 on random weights)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.environ.get("OUT") or "benchmarks/results/h200")
    a = p.parse_args(argv)
    a.dtype = a.dtype or ("bf16" if a.device.startswith("cuda") else "fp32")
    return a


def main(argv: list[str] | None = None) -> int:
    """Run, write the files, print a short table (worst error last)."""
    args = _args(argv)
    res = measure(args)
    paths = write(res, Path(args.out))
    ph = res.phases
    print(f"# {res.fingerprint.get('gpu', res.device)}  target {res.target_params / 1e6:.1f} M  draft "
          f"{res.draft_params / 1e6:.2f} M  {res.dtype}  graphs={res.graphs}  {res.seconds:.1f} s")
    print("# phases (median ms): " + "  ".join(f"{n} {p.median_ms:.4f}" for n, p in ph.items()))
    print(f"# host round trip {res.host_overhead_ms:.4f} ms; plain decode tok/s {res.baseline_tps}")
    print(f"{'k':>2} {'tgt':>5} {'tau':>5} {'sync':>5} {'measured':>10} {'predicted':>10} {'err%':>7}")
    for p in res.points:
        print(f"{p.k:>2} {p.tau_target:>5.2f} {p.tau_measured:>5.2f} {str(p.sync):>5} {p.measured_tps:>10.1f} "
              f"{p.predicted_tps:>10.1f} {p.error_pct:>7.2f}")
    print(f"self-check: {res.self_check}")
    print(f"worst |error| %: {res.worst_error_pct}  files: {', '.join(str(x) for x in paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
