"""Request simulation: per-step model times, accept lengths, decode-log ticks and scheduler stats."""

from __future__ import annotations

import math
import random
import threading
import time
import uuid

from .config import log
from .perf import accept_length, alpha_for_request, step_ms_at
from .versions import measured_0517

__all__ = ["Engine", "Plan"]

_WORDS = ("the", "model", "token", "draft", "verify", "of", "a", "speculative", "decoding", "is", "fast",
          "and", "GPU", "layer", "expert", "in", "to", "with", "for", "Paris", "capital", "France")


class Plan:
    """One request's simulated schedule: prefill, then decode/verify steps (model milliseconds)."""

    def __init__(self, ttft_ms: float, steps: list[tuple[float, int, int]], prompt_tokens: int, max_new: int):
        self.ttft_ms = ttft_ms
        self.steps = steps  # (step_ms, new_tokens, correct_drafts)
        self.prompt_tokens = prompt_tokens
        self.max_new = max_new
        self.rid = uuid.uuid4().hex
        self.started = time.time()

    @property
    def e2e_ms(self) -> float:
        return self.ttft_ms + sum(s[0] for s in self.steps)


class Engine:
    """The scheduler's view: one shared RNG, lifetime spec counters, the decode-log interval."""

    def __init__(self, perf: dict, args: dict, version: str, seed: int, time_scale: float, max_total_tokens: int):
        self.perf = perf
        self.args = args
        self.version = version
        self.rng = random.Random(seed)
        self.time_scale = time_scale
        self.max_total_tokens = max_total_tokens
        self.lock = threading.Lock()
        self.phase = self.rng.random() * 2 * math.pi
        self.t0 = time.time()
        self.tag = "TP0" if (args.get("tp_size") or 1) > 1 else ""
        self.interval = max(int(args.get("decode_log_interval") or 40), 1)
        self.running = 0
        self.running_tokens = 0
        self.forward_ct = 0
        self.iv_tokens = 0
        self.iv_ms = 0.0
        self.iv_accept = 0
        self.iv_correct = 0
        self.iv_verify = 0
        self.life_accept = 0
        self.life_verify = 0
        self.last_gen_throughput = 0.0
        self.last_accept_length: float | None = None
        self.last_accept_rate: float | None = None
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.requests_total = 0
        self.planned = 0  # requests planned since start: the first perf["warmup_requests"] are slower
        self.e2e_sum = 0.0

    # -- planning ---------------------------------------------------------------------------------------
    def _factor(self) -> float:
        p = self.perf
        drift = 1.0 + p["drift_amplitude"] * math.sin(2 * math.pi * (time.time() - self.t0) / p["drift_period_s"]
                                                      + self.phase)
        sigma = math.sqrt(math.log(1 + p["cv"] ** 2))
        batch = 1.0 + 0.08 * max(self.running - 1, 0)
        return self.rng.lognormvariate(-sigma * sigma / 2, sigma) * drift * batch

    def plan(self, prompt_tokens: int, max_new: int, prompt: str = "", temperature: float = 1.0) -> Plan:
        """Draw this request's schedule (accept lengths per verify, noisy step times).

        The request shape matters: each step reads the KV cache of the whole context so far, and the
        draft's acceptance depends on what is asked and on the sampling temperature.
        """
        p = self.perf
        with self.lock:
            f = self._factor()
            if self.planned < p.get("warmup_requests", 0):
                f *= p.get("warmup_factor", 1.0)
            if 0 < p.get("slow_from_launch", 0) <= p.get("launch_number", 0):
                f *= p.get("slow_launch_factor", 1.0)
            self.planned += 1
            ttft = (p["prefill_ms"] + p["prefill_ms_per_token"] * prompt_tokens) * f
            steps: list[tuple[float, int, int]] = []
            remaining = max(max_new - 1, 0)
            context = prompt_tokens + 1
            if p["speculative"]:
                alpha = alpha_for_request(p, prompt, temperature)
                max_acc = max(p["draft_tokens"] - 1, 0)
                while remaining > 0:
                    acc = 0
                    while acc < max_acc and self.rng.random() < alpha:
                        acc += 1
                    new = min(acc + 1, remaining)
                    steps.append((step_ms_at(p, context) * f * self.rng.gauss(1.0, 0.01), new, acc))
                    remaining -= new
                    context += new
            else:
                for _ in range(remaining):
                    steps.append((step_ms_at(p, context) * f * self.rng.gauss(1.0, 0.005), 1, 0))
                    context += 1
        return Plan(ttft, steps, prompt_tokens, max_new)

    def expected_accept_length(self, prompt: str, temperature: float) -> float:
        return accept_length(alpha_for_request(self.perf, prompt, temperature), max(self.perf["draft_tokens"] - 1, 0))

    # -- running ---------------------------------------------------------------------------------------
    def begin(self, plan: Plan) -> None:
        with self.lock:
            self.running += 1
            self.running_tokens += plan.prompt_tokens + 1
            self.prompt_tokens_total += plan.prompt_tokens
        log(f"Prefill batch, #new-seq: 1, #new-token: {plan.prompt_tokens}, #cached-token: 0, "
            f"token usage: {self.running_tokens / self.max_total_tokens:.2f}, #running-req: {self.running - 1}, "
            f"#queue-req: 0", self.tag)

    def step(self, ms: float, new: int, correct: int) -> None:
        """One decode (or verify) iteration of one request; every interval-th one logs a Decode line."""
        with self.lock:
            self.forward_ct += 1
            self.running_tokens += new
            self.iv_tokens += new
            self.iv_ms += ms / max(self.running, 1)
            if self.perf["speculative"]:
                self.iv_accept += correct + 1
                self.iv_correct += correct
                self.iv_verify += 1
            if self.forward_ct % self.interval == 0:
                self._tick()

    def _tick(self) -> None:
        self.last_gen_throughput = self.iv_tokens / (self.iv_ms / 1000.0) if self.iv_ms > 0 else 0.0
        msg = (f"Decode batch, #running-req: {self.running}, #token: {self.running_tokens}, "
               f"token usage: {self.running_tokens / self.max_total_tokens:.2f}, ")
        if self.perf["speculative"]:
            ct = max(self.iv_verify, 1)
            self.last_accept_length = self.iv_accept / ct
            nd = self.perf["draft_tokens"]
            if self.version.startswith("0.5.9"):
                self.last_accept_rate = self.iv_accept / (ct * nd)
            else:
                self.last_accept_rate = self.iv_correct / (ct * max(nd - 1, 1))
            self.life_accept += self.iv_accept
            self.life_verify += self.iv_verify
            msg += f"accept len: {self.last_accept_length:.2f}, accept rate: {self.last_accept_rate:.2f}, "
            graph = self.perf["verify_cuda_graph"]
        else:
            graph = self.perf["decode_cuda_graph"]
        msg += f"cuda graph: {graph}, gen throughput (token/s): {self.last_gen_throughput:.2f}, #queue-req: 0"
        log(msg, self.tag)
        self.iv_tokens = self.iv_accept = self.iv_correct = self.iv_verify = 0
        self.iv_ms = 0.0

    def end(self, plan: Plan, produced: int) -> None:
        with self.lock:
            self.running -= 1
            self.running_tokens -= plan.prompt_tokens + produced
            self.running_tokens = max(self.running_tokens, 0)
            self.generation_tokens_total += produced
            self.requests_total += 1
            self.e2e_sum += plan.e2e_ms / 1000.0

    @property
    def avg_spec_accept_length(self) -> float | None:
        if not self.perf["speculative"] or self.life_verify == 0:
            return None
        return self.life_accept / self.life_verify

    # -- helpers ---------------------------------------------------------------------------------------
    def words(self, n: int) -> tuple[str, list[int]]:
        ids = [self.rng.randrange(100, 160000) for _ in range(n)]
        text = "".join((" " + _WORDS[i % len(_WORDS)]) for i in ids)
        return text, ids

    def meta_info(self, plan: Plan, produced: int, finished: bool) -> dict:
        """meta_info with the version's key names; spec_* only once finished (like SGLang)."""
        meta: dict = {"id": plan.rid, "finish_reason": {"type": "length", "length": produced} if finished else None,
                      "prompt_tokens": plan.prompt_tokens, "weight_version": "default"}
        if self.version.startswith("0.5.9"):
            meta["total_retractions"] = 0
        else:
            meta["num_retractions"] = 0
            meta["reasoning_tokens"] = 0
        m0517 = measured_0517(self.version)
        if m0517:  # the real 0.5.17 order and names (fixtures/sglang-0.5.17-h200/*/generate.json)
            t0 = plan.started
            meta = {k: meta[k] for k in ("id", "finish_reason", "prompt_tokens", "weight_version", "num_retractions")}
            meta.update({"forward_entry_time": t0 + 0.0012, "prefill_finished_time": t0 + plan.ttft_ms / 1000.0,
                         "queue_time": 0.0004, "reasoning_tokens": 0})
        meta.update({"completion_tokens": produced, "cached_tokens": 0})
        if m0517:
            meta.update({"cached_tokens_details": None, "dp_rank": None})
        if finished:
            meta["e2e_latency"] = plan.e2e_ms / 1000.0
            if self.args.get("enable_metrics") and not m0517:  # the request's time stats (tokenizer_manager, --enable-metrics)
                meta["first_token_latency"] = plan.ttft_ms / 1000.0
            verify_ct = len(plan.steps)
            if self.perf["speculative"] and verify_ct > 0:
                correct = sum(s[2] for s in plan.steps)
                nd = self.perf["draft_tokens"]
                proposed = verify_ct * (nd - 1)
                meta["spec_accept_rate"] = correct / proposed if proposed else 0.0
                meta["spec_accept_length"] = produced / verify_ct
                meta["spec_verify_ct"] = verify_ct
                if self.version.startswith("0.5.9"):
                    meta["spec_accept_token_num"] = correct
                    meta["spec_draft_token_num"] = proposed
                else:
                    meta["spec_num_correct_drafts"] = correct
                    meta["spec_num_proposed_drafts"] = proposed
                if m0517:
                    hist = [0] * nd
                    for s in plan.steps:
                        hist[min(s[2], nd - 1)] += 1
                    meta.update({"spec_verify_ct": verify_ct, "spec_accepted_drafts": correct,
                                 "spec_proposed_drafts": proposed, "spec_correct_drafts_histogram": hist[:nd - 1],
                                 "spec_accept_histogram": hist[:nd - 1]})
            if m0517:
                e2e = plan.e2e_ms / 1000.0
                meta.update({"request_received_ts": plan.started, "api_server_dispatch_finish_ts": plan.started + 3e-4,
                             "request_finished_ts": plan.started + e2e,
                             "decode_throughput": produced / max(e2e - plan.ttft_ms / 1000.0, 1e-6),
                             "response_sent_to_client_ts": plan.started + e2e + 3e-4})
        return meta
