"""Measurement tools: batch-1 decode benchmark through the engine's generate route, and the comparator."""

from __future__ import annotations

import statistics
import time
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from specdoctor.errors import NoData, ToolFailed, ToolRetry, Unresolved
from specdoctor.host import http
from specdoctor.host.base import Host
from specdoctor.inference import EngineName, InferenceEngine
from specdoctor.models.measurement import Measurement
from specdoctor.models.workload import WORDS_PER_TOKEN, Workload
from specdoctor.parsers.sglang import BodyError, DecodeLine, parse_body
from specdoctor.stats.comparator import Comparison, compare
from specdoctor.stats.summary import median_ci
from specdoctor.stats.warmup import warming_prefix
from specdoctor.toolkit import ToolContext, tool

__all__ = ["PROMPTS", "Workload", "default_workload", "WORDS_PER_TOKEN", "BenchmarkInput", "RequestResult", "RunResult", "Finding", "BenchmarkResult", "benchmark",
           "log_findings", "CompareInput", "compare_samples", "pooled"]

# A fixed prompt set: every run sends the same requests, so runs are comparable across launches.
PROMPTS = [
    "Explain how a hash map handles collisions, step by step.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Summarise the causes and consequences of the French Revolution.",
    "Describe how to implement binary search in Python and analyse its complexity.",
    "What are the trade-offs between tensor parallelism and pipeline parallelism?",
    "List ten practical tips for writing maintainable code, with a sentence on each.",
]


SETTLE_ROUNDS = 3
"""At most this many times a leading group still warming up is replaced (a server that never settles keeps its
last runs, and its spread says so)."""


def default_workload(max_new_tokens: int = 128) -> Workload:
    """What `benchmark` sends when no workload is given: the fixed chat prompts, greedy, batch 1."""
    return Workload(dataset=None, prompts=list(PROMPTS), output_tokens=max_new_tokens, temperature=0.0, concurrency=1)


class BenchmarkInput(BaseModel):
    """Arguments of benchmark."""

    port: int = Field(default=30000, description="The server's HTTP port on the host.")
    runs: int = Field(default=5, ge=1, le=200, description="Measured runs (one tok/s value each).")
    requests_per_run: int = Field(default=3, ge=1, le=50, description="Sequential batch-1 requests per run.")
    max_new_tokens: int = Field(default=128, ge=2, le=8192)
    warmup_runs: int = Field(default=1, ge=0, le=20, description="Runs made first and discarded.")
    log_path: str | None = Field(default=None, description="Server log on the host, for Decode batch lines.")
    label: str = "benchmark"
    timeout_s: float = Field(default=300, description="Per-request timeout.")
    engine: EngineName | None = Field(default=None, description="Inference engine serving on the port (None: the "
                                      "run's).")
    prompts: list[str] | None = Field(default=None, description="Prompts to cycle through (default: the fixed "
                                      "chat set PROMPTS); a recorded workload's, to compare like with like.")
    temperature: float = Field(default=0.0, ge=0, description="Sampling temperature (0: greedy).")


class RequestResult(BaseModel):
    """One /generate request."""

    completion_tokens: int
    latency_s: float = Field(description="meta_info.e2e_latency when present, else client wall time.")
    latency_source: str
    tok_s: float
    tpot_ms: float | None = None
    spec_accept_length: float | None = None
    spec_verify_ct: int | None = None
    prompt: str = Field(default="", exclude=True, description="What was sent (kept out of the saved result).")
    ttft_s: float | None = Field(default=None, description="Time to the first token: meta_info."
                                        "first_token_latency when the server reports it (--enable-metrics), else "
                                        "the e2e latency of a one-token request with the same prompt.")
    ttft_source: Literal["first_token_latency", "one-token probe"] | None = None

    @property
    def decode_s(self) -> float | None:
        """The latency after the first token (prefill excluded), when the first token's time is known."""
        if self.ttft_s is None or self.completion_tokens < 2 or self.latency_s <= self.ttft_s:
            return None
        return self.latency_s - self.ttft_s


class RunResult(BaseModel):
    """One run: several requests, one throughput value (sum tokens / sum latency)."""

    tok_s: float
    decode_tok_s: float | None = Field(default=None, description="The same run with prefill excluded: tokens after "
                                       "the first / latency after the first token (None when a request's first-token "
                                       "time is unknown).")
    tpot_ms: float | None = None
    accept_length: float | None = None
    requests: list[RequestResult] = Field(default_factory=list)


class Finding(BaseModel):
    """Something the measurement revealed beyond the numbers."""

    kind: str
    message: str
    evidence: list[str] = Field(default_factory=list)


class BenchmarkResult(Measurement):
    """Per-run tok/s samples with median and 95 % CI, TPOT, accept length, CUDA-graph use and findings: the shared
    `Measurement` (summary, samples) plus the tool's detail (runs, spread, settings, findings)."""

    model_config = ConfigDict(extra="ignore", validate_assignment=False)  # the tool's output, filled in place

    label: str = ""
    port: int
    samples: list[float] = Field(default_factory=list, description="One tok/s value per measured run.")
    decode_samples: list[float] = Field(default_factory=list, description="One decode-only tok/s value per run "
                                        "(prefill excluded), for claims measured that way; empty when unknown.")
    median: float
    ci_low: float
    ci_high: float
    mean: float
    stdev: float
    cv: float | None = None
    speculative: bool = False
    cuda_graph: bool | None = Field(default=None, description="From the log: did every decode/verify replay a graph?")
    log_accept_length: float | None = None
    log_gen_throughput: float | None = None
    runs: list[RunResult] = Field(default_factory=list)
    max_new_tokens: int = 0
    requests_per_run: int = 0
    warmup_runs: int = 0
    warmup_discarded: list[float] = Field(default_factory=list, description="tok/s of leading runs found still "
                                          "warming up (slower than every later run) and replaced by more runs.")
    findings: list[Finding] = Field(default_factory=list)
    workload: Workload | None = Field(default=None, description="What the figure was measured on: prompt set, "
                                      "output length, temperature, concurrency (one request at a time).")

    def summary_line(self) -> str:
        acc = f", accept length {self.accept_length:.2f}" if self.accept_length else ""
        return (f"{self.label}: {self.median:.1f} tok/s [{self.ci_low:.1f}, {self.ci_high:.1f}] over "
                f"{len(self.samples)} runs (cv {100 * (self.cv or 0):.1f} %){acc}")


def _one_request(client: httpx.Client, engine: InferenceEngine, prompt: str, max_new_tokens: int,
                 timeout: float, temperature: float = 0.0) -> RequestResult:
    path = engine.generate_path
    before = _scrape(client, engine)
    t0 = time.perf_counter()
    try:
        r = client.post(path, json=engine.generate_payload(prompt, max_new_tokens, temperature=temperature),
                        timeout=timeout)
    except httpx.HTTPError as exc:
        raise ToolFailed(f"{path} failed: {type(exc).__name__}: {exc}") from None
    wall = time.perf_counter() - t0
    if r.status_code != 200:
        raise ToolFailed(f"{path} answered HTTP {r.status_code}: {r.text[:200]}")
    try:
        body = parse_body(r.text)
    except BodyError as exc:
        raise ToolFailed(f"{path}: {exc}") from None
    if isinstance(body, list) and body:
        body = body[0]
    meta = engine.read_meta(body)
    after = _scrape(client, engine) if before is not None else None
    if before is not None and after is not None:  # the server's own clock and counters for this one request
        meta = engine.meta_from_metrics(meta, before, after)
    tokens = meta.completion_tokens
    if not tokens:
        ids = body.get("output_ids") if isinstance(body, dict) else None
        tokens = len(ids) if isinstance(ids, list) else 0
    if not tokens:
        raise ToolFailed(f"{path} returned no completion tokens")
    latency, source = (meta.e2e_latency, "e2e_latency") if meta.e2e_latency else (wall, "client")
    # A duration within the request (seconds), or not used: the one-token probe measures it instead.
    ftl = meta.first_token_latency
    first = ftl if source == "e2e_latency" and isinstance(ftl, int | float) and 0 < ftl < latency else None
    tpot = None
    if first is not None and tokens > 1:
        tpot = 1000 * (latency - first) / (tokens - 1)
    elif tokens > 0:
        tpot = 1000 * latency / tokens
    accept = meta.spec_accept_length
    if accept is None and meta.spec_verify_ct:
        accept = tokens / meta.spec_verify_ct
    return RequestResult(completion_tokens=tokens, latency_s=latency, latency_source=source, tok_s=tokens / latency,
                         tpot_ms=tpot, spec_accept_length=accept, spec_verify_ct=meta.spec_verify_ct, prompt=prompt,
                         ttft_s=first, ttft_source="first_token_latency" if first is not None else None)


def _run(client: httpx.Client, engine: InferenceEngine, args: BenchmarkInput, offset: int) -> RunResult:
    prompts = args.prompts or PROMPTS
    reqs = [_one_request(client, engine, prompts[(offset + i) % len(prompts)], args.max_new_tokens, args.timeout_s,
                         args.temperature) for i in range(args.requests_per_run)]
    tokens = sum(r.completion_tokens for r in reqs)
    latency = sum(r.latency_s for r in reqs)
    tpots = [r.tpot_ms for r in reqs if r.tpot_ms is not None]
    accepts = [r.spec_accept_length for r in reqs if r.spec_accept_length is not None]
    return RunResult(tok_s=tokens / latency, tpot_ms=statistics.fmean(tpots) if tpots else None,
                     accept_length=statistics.fmean(accepts) if accepts else None, requests=reqs)


def _scrape(client: httpx.Client, engine: InferenceEngine) -> str | None:
    """The engine's metrics text, for an engine whose responses carry no server-side timing or acceptance (vLLM):
    scraped before and after each request; None for the others."""
    if not engine.metrics_path:
        return None
    try:
        r = client.get(engine.metrics_path, timeout=10)
    except httpx.HTTPError:
        return None
    return r.text if r.status_code == 200 else None


def _decode_tok_s(run: RunResult) -> float | None:
    """Tokens after the first over the time after the first token, summed over the run's requests."""
    parts = [(r.completion_tokens - 1, r.decode_s) for r in run.requests]
    if not parts or any(d is None for _, d in parts):
        return None
    seconds = sum(d for _, d in parts if d is not None)
    return sum(n for n, _ in parts) / seconds if seconds > 0 else None


def _first_token_times(client: httpx.Client, engine: InferenceEngine, runs: list[RunResult],
                       args: BenchmarkInput) -> None:
    """Fill in each request's first-token time where the server did not report it: one one-token request per
    distinct prompt (its e2e latency is the prefill), so that a claim measured without prefill can be compared
    like with like. Leaves them unknown when the server's latencies are client wall times (not its own clock)."""
    missing = {r.prompt for run in runs for r in run.requests if r.ttft_s is None}
    if not missing or any(r.latency_source != "e2e_latency" for run in runs for r in run.requests):
        return
    probe: dict[str, float] = {}
    for prompt in sorted(missing):
        try:
            one = _one_request(client, engine, prompt, 1, args.timeout_s, args.temperature)
        except ToolFailed:
            return  # the end-to-end runs stand; only the decode-only reading stays unknown
        if one.latency_source != "e2e_latency":
            return
        probe[prompt] = one.latency_s
    for run in runs:
        for r in run.requests:
            if r.ttft_s is None:
                r.ttft_s, r.ttft_source = probe[r.prompt], "one-token probe"


def log_findings(lines: list[DecodeLine], speculative: bool) -> tuple[list[Finding], bool | None]:
    """Findings from Decode-batch lines: verify not replaying a CUDA graph, accept length seen in the log."""
    findings: list[Finding] = []
    graphs = [ln.graph for ln in lines if ln.graph is not None]
    cuda_graph = all(graphs) if graphs else None
    spec_lines = [ln for ln in lines if ln.accept_len is not None]
    no_graph = [ln for ln in spec_lines if ln.graph is False]
    if speculative and no_graph:
        bs1 = [ln for ln in no_graph if (ln.running_req or 0) <= 1]
        findings.append(Finding(
            kind="verify-no-cuda-graph",
            message=(f"verify is not replaying a CUDA graph: {len(no_graph)} of {len(spec_lines)} speculative "
                     f"Decode batch lines say 'cuda graph: False'"
                     + (f" ({len(bs1)} at batch size 1, so not a max-bs overflow)" if bs1 else "")
                     + ". TARGET_VERIFY can be captured; check --disable-cuda-graph, cuda-graph max bs and "
                       "num_draft_tokens against the captured width."),
            evidence=[f"running-req={ln.running_req} accept_len={ln.accept_len} graph={ln.graph} "
                      f"gen_tps={ln.gen_throughput}" for ln in no_graph[:5]]))
    elif not speculative and graphs and not any(graphs):
        findings.append(Finding(kind="decode-no-cuda-graph",
                                message="decode is not replaying a CUDA graph ('cuda graph: False' on every line)"))
    return findings, cuda_graph


def _read_log_from(host: Host, path: str, offset: int) -> str:
    res = host.run(["tail", "-c", f"+{offset + 1}", path], check="ignore")
    return res.stdout if res.ok else ""


def _log_size(host: Host, path: str) -> int | None:
    res = host.run(["wc", "-c", path], check="ignore")
    first = res.stdout.split()[:1]
    return int(first[0]) if res.ok and first and first[0].isdigit() else None


def _measure_runs(ctx: ToolContext, engine: InferenceEngine, args: BenchmarkInput,
                  ) -> tuple[list[RunResult], list[float]]:
    """Warm-up runs (discarded), then the measured runs (a leading group still warming up replaced) and their
    first-token times, over one forwarded port; the runs and the tok/s of those replaced."""
    runs: list[RunResult] = []
    discarded: list[float] = []
    with ctx.host.forward(args.port) as local:
        with http.client(base_url=f"http://127.0.0.1:{local}") as client:
            try:
                client.get(engine.liveness_path, timeout=10)
            except httpx.HTTPError as exc:
                raise NoData(f"no server answering on port {args.port}: {type(exc).__name__}") from None
            for w in range(args.warmup_runs):
                ctx.say(f"{args.label}: warm-up {w + 1}/{args.warmup_runs}")
                _run(client, engine, args, 0)
            for i in range(args.runs):
                runs.append(_run(client, engine, args, i * args.requests_per_run))
                ctx.say(f"{args.label}: run {i + 1}/{args.runs}: {runs[-1].tok_s:.1f} tok/s")
            if args.warmup_runs:  # a fresh look at the server: its first runs may still have been warming up
                runs, discarded = _settled(ctx, client, engine, args, runs)
            _first_token_times(client, engine, runs, args)
    return runs, discarded


def _settled(ctx: ToolContext, client: httpx.Client, engine: InferenceEngine, args: BenchmarkInput,
             runs: list[RunResult]) -> tuple[list[RunResult], list[float]]:
    """Drop a leading group of runs that was still warming up (stats.warmup) and make as many again, at most
    SETTLE_ROUNDS times; the dropped runs' tok/s are returned for the record."""
    discarded: list[float] = []
    made = len(runs)
    for _ in range(SETTLE_ROUNDS):
        k = warming_prefix([r.tok_s for r in runs])
        if not k:
            break
        discarded += [r.tok_s for r in runs[:k]]
        runs = runs[k:]
        ctx.say(f"{args.label}: the first {k} run(s) were still warming up (slower than every later run): "
                f"{k} more")
        for _ in range(k):
            runs.append(_run(client, engine, args, made * args.requests_per_run))
            made += 1
            ctx.say(f"{args.label}: run {made}: {runs[-1].tok_s:.1f} tok/s")
    return runs, discarded


def _summarise_runs(args: BenchmarkInput, runs: list[RunResult]) -> BenchmarkResult:
    """Median tok/s with its CI, spread, TPOT and accept length over the runs (decode-only samples when every run
    has one)."""
    for run in runs:
        run.decode_tok_s = _decode_tok_s(run)
    return BenchmarkResult(label=args.label, port=args.port, max_new_tokens=args.max_new_tokens,
                           requests_per_run=args.requests_per_run, warmup_runs=args.warmup_runs,
                           workload=_workload_of(args), **_figures(runs))


def _figures(runs: list[RunResult]) -> dict[str, Any]:
    """What a benchmark's runs add up to: samples, median with its CI, spread, TPOT and accept length."""
    decode = [r.decode_tok_s for r in runs if r.decode_tok_s is not None]
    samples = [r.tok_s for r in runs]
    lo, hi = median_ci(samples)
    mean = statistics.fmean(samples)
    sd = statistics.stdev(samples) if len(samples) > 1 else 0.0
    tpots = [r.tpot_ms for r in runs if r.tpot_ms is not None]
    accepts = [r.accept_length for r in runs if r.accept_length is not None]
    return dict(samples=samples, decode_samples=decode if len(decode) == len(runs) else [],
                median=statistics.median(samples), ci_low=lo, ci_high=hi, mean=mean, stdev=sd,
                cv=sd / mean if mean else None, tpot_ms=statistics.median(tpots) if tpots else None,
                accept_length=statistics.median(accepts) if accepts else None, speculative=bool(accepts), runs=runs)


def pooled(first: BenchmarkResult, more: BenchmarkResult) -> BenchmarkResult:
    """Two benchmarks of one server on one workload as one reading: the runs pooled, every figure worked out again
    (a tighter interval, where a second reading on its own would be just as loose)."""
    seen = {f.message for f in first.findings}
    return first.model_copy(update={**_figures([*first.runs, *more.runs]),
                                    "findings": [*first.findings, *(f for f in more.findings if f.message not in seen)],
                                    "warmup_discarded": [*first.warmup_discarded, *more.warmup_discarded]})


def _workload_of(args: BenchmarkInput) -> Workload:
    """The workload this benchmark sent (requests go one at a time: concurrency 1)."""
    if not args.prompts or list(args.prompts) == PROMPTS:
        return default_workload(args.max_new_tokens).model_copy(update={"temperature": args.temperature})
    return Workload(prompts=list(args.prompts), output_tokens=args.max_new_tokens, temperature=args.temperature,
                    concurrency=1)


def _log_evidence(ctx: ToolContext, engine: InferenceEngine, args: BenchmarkInput, log_path: str,
                  log_offset: int | None, out: BenchmarkResult) -> None:
    """Findings, CUDA graph use, accept length and gen throughput from the decode lines this benchmark added to
    the server log (the whole log when it added none)."""
    text = _read_log_from(ctx.host, log_path, log_offset or 0)
    lines = engine.decode_lines(text)
    if not lines and log_offset:
        lines = engine.decode_lines(_read_log_from(ctx.host, log_path, 0))
    spec = out.speculative or any(ln.accept_len is not None for ln in lines)
    out.speculative = spec
    out.findings, out.cuda_graph = log_findings(lines, spec)
    accs = [ln.accept_len for ln in lines if ln.accept_len is not None]
    gens = [ln.gen_throughput for ln in lines if ln.gen_throughput]
    out.log_accept_length = statistics.fmean(accs) if accs else None
    out.log_gen_throughput = statistics.median(gens) if gens else None
    if not lines:
        out.findings.append(Finding(kind="no-decode-log", message=f"no 'Decode batch' lines in {log_path} "
                                    "(decode_log_interval larger than the requests?)"))


@tool(effect="read")
def benchmark(ctx: ToolContext, args: BenchmarkInput) -> BenchmarkResult:
    """Batch-1 decode throughput via /generate (temperature 0, ignore_eos, fixed prompts): one tok/s per run.

    Warm-up runs are discarded; each run is several sequential requests (not independent samples on their own);
    reports the median with a 95 % bootstrap CI, TPOT, accept length and findings from the server log, and each run
    again with the prefill excluded (`decode_samples`: how a claim read from a server log or 1/TPOT is measured).
    """
    engine = ctx.engine_named(args.engine)
    log_offset = _log_size(ctx.host, args.log_path) if args.log_path else None
    runs, discarded = _measure_runs(ctx, engine, args)
    out = _summarise_runs(args, runs)
    if discarded:
        out.warmup_discarded = discarded
        out.findings.append(Finding(kind="warming-up", message=(
            f"the first {len(discarded)} measured run(s) ({', '.join(f'{x:.1f}' for x in discarded)} tok/s) were "
            "slower than every later one: the server was still warming up (compiles, caches); replaced by as many "
            "more runs")))
    if args.log_path:
        _log_evidence(ctx, engine, args, args.log_path, log_offset, out)
    if out.cv is not None and out.cv > 0.05:
        out.findings.append(Finding(kind="noisy", message=f"run-to-run spread is high (cv {100 * out.cv:.1f} %): "
                                    "other load on the GPUs or clocks changing?"))
    return out


class CompareInput(BaseModel):
    """Arguments of compare_samples."""

    a: list[float] = Field(description="Samples of the reference (one value per run).")
    b: list[float] = Field(description="Samples of the candidate.")
    unit: str = "tok/s"
    higher_is_better: bool = True
    magnitude: float | None = Field(default=None, description="Smallest change that matters, in `unit` "
                                    "(default 5 % of A's median): sets how sure SAME must be.")


@tool(effect="read")
def compare_samples(ctx: ToolContext, args: CompareInput) -> Comparison:
    """Pinpoint-style comparison: DIFFERENT (p <= 0.01 on min(KS, MWU)), SAME, or UNKNOWN (more runs needed).

    The effect is median(b) - median(a) in the user's unit with a bootstrap CI and % change.
    """
    if len(args.a) < 2 or len(args.b) < 2:
        raise ToolRetry("need at least 2 samples on each side (ideally 5+)")
    try:
        return compare(args.a, args.b, unit=args.unit, higher_is_better=args.higher_is_better,
                       magnitude=args.magnitude)
    except ValueError as exc:
        raise Unresolved(str(exc)) from None

