"""The shared twin engine with vLLM 0.26's bookkeeping: stats lines, spec-decode counters, no prefill lines."""

from __future__ import annotations

import os
import sys
import time

from vllm._twin.engine import Engine, Plan

__all__ = ["VllmEngine", "vlog"]


def vlog(msg: str, where: str = "loggers.py:310", proc: str = "APIServer", level: str = "INFO") -> None:
    """One vLLM log line: `(APIServer pid=N) INFO mm-dd HH:MM:SS [file:line] msg` (logger.py:22,
    utils/system_utils.py:209)."""
    sys.stderr.write(f"({proc} pid={os.getpid()}) {level} {time.strftime('%m-%d %H:%M:%S')} [{where}] {msg}\n")
    sys.stderr.flush()


class VllmEngine(Engine):
    """Counters as vLLM's /metrics has them, and its periodic `Engine 000:` + `SpecDecoding metrics:` lines."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.created = time.time()  # prometheus_client's `_created` sample of every counter
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted = 0
        self.accepted_per_pos = [0] * max(int(self.perf.get("k") or 0), 0)
        self.iv_prompt = 0
        self.ttft_sum = 0.0
        self.log_stats = not self.args.get("disable_log_stats")

    def begin(self, plan: Plan) -> None:
        with self.lock:
            self.running += 1
            self.running_tokens += plan.prompt_tokens + 1
            self.prompt_tokens_total += plan.prompt_tokens
            self.iv_prompt += plan.prompt_tokens

    def end(self, plan: Plan, produced: int) -> None:
        with self.lock:
            self.ttft_sum += plan.ttft_ms / 1000.0
        super().end(plan, produced)

    def step(self, ms: float, new: int, correct: int) -> None:
        super().step(ms, new, correct)
        with self.lock:
            if self.perf["speculative"]:
                self.drafts += 1
                self.draft_tokens += int(self.perf["k"])
                self.accepted += correct
                for pos in range(min(correct, len(self.accepted_per_pos))):  # position i accepted iff i < correct
                    self.accepted_per_pos[pos] += 1

    def _tick(self) -> None:
        gen = self.iv_tokens / (self.iv_ms / 1000.0) if self.iv_ms > 0 else 0.0
        self.last_gen_throughput = gen
        secs = max(self.iv_ms / 1000.0, 1e-6)
        if self.log_stats:
            vlog(f"Engine 000: Avg prompt throughput: {self.iv_prompt / secs:.1f} tokens/s, Avg generation "
                 f"throughput: {gen:.1f} tokens/s, Running: {self.running} reqs, Waiting: 0 reqs, GPU KV cache "
                 f"usage: {100 * self.running_tokens / self.max_total_tokens:.1f}%, Prefix cache hit rate: 0.0%")
        if self.perf["speculative"] and self.iv_verify:
            k = max(int(self.perf["k"]), 1)
            acc = self.iv_correct
            self.last_accept_length = 1 + acc / self.iv_verify
            self.last_accept_rate = acc / (self.iv_verify * k)
            self.life_accept += self.iv_accept
            self.life_verify += self.iv_verify
            if self.log_stats:
                per_pos = ", ".join(f"{max(self.last_accept_rate * (1.25 - 0.25 * i), 0.0):.3f}" for i in range(k))
                vlog(f"SpecDecoding metrics: Mean acceptance length: {self.last_accept_length:.2f}, Accepted "
                     f"throughput: {acc / secs:.2f} tokens/s, Drafted throughput: {self.iv_verify * k / secs:.2f} "
                     f"tokens/s, Accepted: {acc} tokens, Drafted: {self.iv_verify * k} tokens, Per-position "
                     f"acceptance rate: {per_pos}, Avg Draft acceptance rate: {100 * self.last_accept_rate:.1f}%",
                     where="metrics.py:120")
        self.iv_tokens = self.iv_accept = self.iv_correct = self.iv_verify = self.iv_prompt = 0
        self.iv_ms = 0.0

    def metrics(self, model: str) -> str:
        """/metrics as prometheus_client writes vLLM's counters (spec_decode/metrics.py:229-252, `_total`)."""
        labels = f'engine="0",model_name="{model}"'
        rows = [("counter", "vllm:prompt_tokens_total", "Number of prefill tokens processed.", self.prompt_tokens_total),
                ("counter", "vllm:generation_tokens_total", "Number of generation tokens processed.",
                 self.generation_tokens_total),
                ("gauge", "vllm:num_requests_running", "Number of requests in model execution batches.", self.running),
                ("gauge", "vllm:num_requests_waiting", "Number of requests waiting to be processed.", 0)]
        if self.perf["speculative"]:
            rows += [("counter", "vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", self.drafts),
                     ("counter", "vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.",
                      self.draft_tokens),
                     ("counter", "vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
                      self.accepted)]
        out = []
        for kind, name, help_, value in rows:
            out += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {float(value)}"]
            if kind == "counter":  # as the real 0.26 /metrics has it (H100, 2026-12-06): a `_created` gauge each
                out += self._created(name, help_, [labels])
        if self.perf["speculative"]:  # spec_decode/metrics.py:252, one series a draft position
            name = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
            out += [f"# HELP {name} Accepted tokens per draft position.", f"# TYPE {name} counter"]
            out += [f'{name}{{{labels},position="{pos}"}} {float(n)}' for pos, n in enumerate(self.accepted_per_pos)]
            out += self._created(name, "Accepted tokens per draft position.",
                                 [f'{labels},position="{pos}"' for pos in range(len(self.accepted_per_pos))])
        # Histograms in model seconds (v1/metrics/loggers.py:797, :913): what the server's own clock says.
        for name, help_, total in (("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                                    self.ttft_sum),
                                   ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                                    self.e2e_sum)):
            out += [f"# HELP {name} {help_}", f"# TYPE {name} histogram",
                    f'{name}_bucket{{{labels},le="+Inf"}} {float(self.requests_total)}',
                    f"{name}_count{{{labels}}} {float(self.requests_total)}", f"{name}_sum{{{labels}}} {total}"]
        return "\n".join(out) + "\n"

    def _created(self, counter: str, help_: str, label_sets: list[str]) -> list[str]:
        """prometheus_client's companion gauge of a counter: NAME_created (without `_total`), the series' start."""
        name = counter.removesuffix("_total") + "_created"
        return [f"# HELP {name} {help_}", f"# TYPE {name} gauge",
                *[f"{name}{{{lbl}}} {self.created}" for lbl in label_sets]]
