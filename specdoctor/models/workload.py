"""The workload behind a throughput figure: prompt set, lengths, temperature and concurrency (every figure states it)."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["WORDS_PER_TOKEN", "Workload"]

WORDS_PER_TOKEN = 0.75
"""English text runs about 0.75 words per BPE token: how a recorded prompt length becomes a prompt (approximate; the
server's own prompt-token count is what the measurement reports)."""


class Workload(BaseModel):
    """The requests behind a throughput figure (what the good run or the user recorded), and today's default."""

    dataset: str | None = Field(default=None, description="Where the prompts came from (e.g. humaneval, sharegpt).")
    prompt_example: str | None = Field(default=None, description="A prompt of that dataset, as recorded.")
    prompts: list[str] = Field(default_factory=list, description="The prompts themselves, when recorded.")
    prompt_tokens: int | None = Field(default=None, ge=1, description="Prompt length per request.")
    output_tokens: int | None = Field(default=None, ge=1, description="Generated tokens per request.")
    temperature: float | None = Field(default=None, ge=0)
    concurrency: int | None = Field(default=None, ge=1, description="Requests in flight (the benchmark runs 1).")

    def request_prompts(self) -> list[str]:
        """The prompts to send: recorded ones, else the example stretched to the recorded length, else []."""
        if self.prompts:
            return list(self.prompts)
        if not self.prompt_example:
            return []
        text = self.prompt_example.strip()
        if self.prompt_tokens:
            words = max(1, round(self.prompt_tokens * WORDS_PER_TOKEN))
            base = text.split()
            reps = -(-words // max(len(base), 1))
            text = "\n".join([text] * reps) if reps > 1 else text
        return [text]

    def differs_from(self, other: Workload) -> list[str]:
        """What differs from `other` (today's benchmark), field by field, as '<field>: a → b'; [] when alike."""
        out = []
        if self.dataset and self.dataset != other.dataset:
            out.append(f"dataset: {other.dataset or 'fixed chat prompts'} → {self.dataset}")
        if (self.prompts or self.prompt_example) and self.request_prompts() != other.request_prompts():
            if not any(o.startswith("dataset") for o in out):
                out.append("prompts differ")
        for name in ("prompt_tokens", "output_tokens", "temperature", "concurrency"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine is not None and theirs is not None and float(mine) != float(theirs):
                out.append(f"{name.replace('_', ' ')}: {theirs:g} → {mine:g}")
        return out

    def line(self) -> str:
        """'humaneval prompts (1), 128 output tokens, temperature 0, 1 request at a time' — what a reader compares."""
        what = f"{self.dataset} prompts" if self.dataset else "fixed chat prompts"
        n = len(self.prompts) or (1 if self.prompt_example else 0)
        parts = [what + (f" ({n})" if n else "")]
        if self.prompt_tokens:
            parts.append(f"~{self.prompt_tokens} prompt tokens")
        if self.output_tokens:
            parts.append(f"{self.output_tokens} output tokens")
        if self.temperature is not None:
            parts.append(f"temperature {self.temperature:g}")
        if self.concurrency:
            parts.append("1 request at a time" if self.concurrency == 1 else f"{self.concurrency} requests in flight")
        return ", ".join(parts)
