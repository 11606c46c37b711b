"""A small Llama-like target and a 1-layer EAGLE-style draft head in plain PyTorch, with a static KV cache.

Why plain torch: the H200 is launch-bound under eager `transformers` (tens of ms per forward of a 0.9 B model),
so every step here works on static shapes and static buffers (positions live in a device tensor) and can be
captured in a CUDA graph; the same code runs eagerly on the CPU for tests.

`SpecEngine` holds the state of one greedy generation (batch 1) and its steps:
  decode       1 target token at `pos` (plain decoding; appends the argmax)
  draft_first  the draft over 2 tokens [last accepted, bonus] at pos−1, pos with target features → chain[1]
  draft_step   one more draft token: chain[s] at pos+s → chain[s+1]
  verify(k)    the target over chain[0..k] (k+1 tokens) at pos..pos+k in ONE forward: k+1 logits and hiddens
  accept(k)    n accepted drafts (simulated Bernoulli, or real greedy matching), bonus = target argmax at n,
               commit chain[1..n] + bonus, rewind the KV cache to pos+n+1 (stale entries are masked, then
               overwritten), and set up the next draft input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, Field
from torch import nn

__all__ = ["ModelConfig", "TINY", "GPU_1B", "Target", "DraftHead", "SpecEngine", "KMAX"]

KMAX = 5  # largest number of draft steps the buffers are sized for
_EPS = 1e-5


class ModelConfig(BaseModel):
    """Shape of the target (the draft head uses one layer of the same width)."""

    vocab: int = Field(default=32000, ge=8)
    hidden: int = Field(default=2048, ge=8)
    layers: int = Field(default=16, ge=1)
    heads: int = Field(default=32, ge=1)
    kv_heads: int = Field(default=8, ge=1)
    inter: int = Field(default=8192, ge=8)
    rope_theta: float = 500000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def params(self, draft: bool = False) -> int:
        """Parameter count (target with embedding and LM head; or the draft head without the shared ones)."""
        h, hd = self.hidden, self.head_dim
        layer = h * (self.heads + 2 * self.kv_heads) * hd + self.heads * hd * h + 3 * h * self.inter + 2 * h
        if draft:
            return layer + 2 * h * h + h
        return self.layers * layer + 2 * self.vocab * h + h


GPU_1B = ModelConfig()  # ~1.1 B parameters (Llama-3.2-1B shape with a 32k vocabulary)
TINY = ModelConfig(vocab=256, hidden=64, layers=2, heads=4, kv_heads=2, inter=128)


def _rope_tables(cfg: ModelConfig, max_len: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, device=device, dtype=torch.float64) / cfg.head_dim))
    ang = torch.arange(max_len, device=device, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE; x [1, heads, T, hd], cos/sin [T, hd/2]."""
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


class Block(nn.Module):
    """Pre-norm decoder layer: RMSNorm, GQA attention over a static KV cache, RMSNorm, SwiGLU MLP."""

    def __init__(self, cfg: ModelConfig, max_len: int, dtype: torch.dtype, device: torch.device, out_scale: float):
        super().__init__()
        h, hd = cfg.hidden, cfg.head_dim
        self.cfg = cfg
        kw = {"dtype": dtype, "device": device}
        self.qkv = nn.Linear(h, (cfg.heads + 2 * cfg.kv_heads) * hd, bias=False, **kw)
        self.o = nn.Linear(cfg.heads * hd, h, bias=False, **kw)
        self.gate_up = nn.Linear(h, 2 * cfg.inter, bias=False, **kw)
        self.down = nn.Linear(cfg.inter, h, bias=False, **kw)
        self.n1 = nn.Parameter(torch.ones(h, **kw))
        self.n2 = nn.Parameter(torch.ones(h, **kw))
        for lin, std in ((self.qkv, 0.02), (self.o, 0.02 * out_scale), (self.gate_up, 0.02), (self.down, 0.02 * out_scale)):
            nn.init.normal_(lin.weight, std=std)
        self.register_buffer("k_cache", torch.zeros(1, cfg.kv_heads, max_len, hd, **kw), persistent=False)
        self.register_buffer("v_cache", torch.zeros(1, cfg.kv_heads, max_len, hd, **kw), persistent=False)

    def _expand(self, cache: torch.Tensor) -> torch.Tensor:
        """GQA: repeat each KV head for its query heads (expand + reshape: no host sync, graph-safe)."""
        c = self.cfg
        rep = c.heads // c.kv_heads
        if rep == 1:
            return cache
        _, kvh, n, hd = cache.shape
        return cache[:, :, None].expand(1, kvh, rep, n, hd).reshape(1, kvh * rep, n, hd)

    def forward(self, x: torch.Tensor, idx: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        c, t = self.cfg, x.shape[1]
        hd = c.head_dim
        h = F.rms_norm(x, (c.hidden,), self.n1, _EPS)
        q, k, v = self.qkv(h).split([c.heads * hd, c.kv_heads * hd, c.kv_heads * hd], dim=-1)
        q = _rope(q.view(1, t, c.heads, hd).transpose(1, 2), cos, sin)
        k = _rope(k.view(1, t, c.kv_heads, hd).transpose(1, 2), cos, sin)
        v = v.view(1, t, c.kv_heads, hd).transpose(1, 2)
        self.k_cache.index_copy_(2, idx, k)  # write at the token positions; nothing else in the cache moves
        self.v_cache.index_copy_(2, idx, v)
        kk, vv = self._expand(self.k_cache), self._expand(self.v_cache)
        a = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(1, t, c.heads * hd))
        g, u = self.gate_up(F.rms_norm(x, (c.hidden,), self.n2, _EPS)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class Target(nn.Module):
    """The target model: embedding, `layers` blocks, final norm, LM head; bf16 random weights."""

    def __init__(self, cfg: ModelConfig, max_len: int, dtype: torch.dtype, device: torch.device):
        super().__init__()
        self.cfg, self.max_len = cfg, max_len
        kw = {"dtype": dtype, "device": device}
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden, **kw)
        nn.init.normal_(self.embed.weight, std=1.0)
        scale = (2 * cfg.layers) ** -0.5
        self.blocks = nn.ModuleList(Block(cfg, max_len, dtype, device, scale) for _ in range(cfg.layers))
        self.norm = nn.Parameter(torch.ones(cfg.hidden, **kw))
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False, **kw)
        nn.init.normal_(self.lm_head.weight, std=cfg.hidden ** -0.5)
        cos, sin = _rope_tables(cfg, max_len, device)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("kpos", torch.arange(max_len, device=device), persistent=False)

    def mask(self, idx: torch.Tensor) -> torch.Tensor:
        """Causal mask over the whole static cache: query at position p sees keys at positions ≤ p."""
        return self.kpos[None, :] <= idx[:, None]

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return self.lm_head(F.rms_norm(h, (self.cfg.hidden,), self.norm, _EPS))

    def forward(self, tokens: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """tokens [1, T] at positions idx [T] → (logits [T, V], last hidden before the final norm [T, H])."""
        x = self.embed(tokens)
        cos, sin, mask = self.cos[idx], self.sin[idx], self.mask(idx)
        for b in self.blocks:
            x = b(x, idx, cos, sin, mask)
        return self.head(x[0]), x[0]


class DraftHead(nn.Module):
    """EAGLE-style draft: fc(concat(embedding, feature)) → one decoder layer with its own KV cache → target's head."""

    def __init__(self, target: Target, dtype: torch.dtype, device: torch.device):
        super().__init__()
        cfg = target.cfg
        self.target = [target]  # a list so the target's parameters are not registered twice
        self.fc = nn.Linear(2 * cfg.hidden, cfg.hidden, bias=False, dtype=dtype, device=device)
        nn.init.normal_(self.fc.weight, std=0.02)
        self.block = Block(cfg, target.max_len, dtype, device, 1.0)

    def forward(self, tokens: torch.Tensor, feats: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """tokens [1, T], features [T, H] (target hidden of the position before each token) → (logits, hidden)."""
        t = self.target[0]
        x = self.fc(torch.cat([t.embed(tokens), feats[None].to(t.embed.weight.dtype)], dim=-1))
        x = self.block(x, idx, t.cos[idx], t.sin[idx], t.mask(idx))
        return t.head(x[0]), x[0]


AcceptMode = Literal["simulate", "greedy"]


class SpecEngine:
    """Buffers and steps of one batch-1 generation; every step only touches static device buffers."""

    def __init__(self, cfg: ModelConfig, *, max_len: int, max_out: int, max_cycles: int, dtype: torch.dtype,
                 device: torch.device, seed: int = 0, accept_mode: AcceptMode = "simulate"):
        torch.manual_seed(seed)
        self.cfg, self.device, self.accept_mode = cfg, device, accept_mode
        self.target = Target(cfg, max_len, dtype, device).eval()
        self.draft = DraftHead(self.target, dtype, device).eval()
        for prm in [*self.target.parameters(), *self.draft.parameters()]:
            prm.requires_grad_(False)
        lng = {"dtype": torch.long, "device": device}
        self.ar = torch.arange(max(KMAX + 2, 2), **lng)
        self.pos = torch.zeros(1, **lng)            # target KV length = position of chain[0]
        self.chain = torch.zeros(KMAX + 2, **lng)   # chain[0] = next token (bonus), chain[1..k] = drafts
        self.tokens2 = torch.zeros(2, **lng)        # draft_first input: [last accepted, bonus]
        self.hidden2 = torch.zeros(2, cfg.hidden, dtype=dtype, device=device)
        self.dh = torch.zeros(1, cfg.hidden, dtype=dtype, device=device)
        self.dstep = torch.ones(1, **lng)
        self.g = torch.zeros(KMAX + 1, **lng)       # target argmax at each verified position
        self.hv = torch.zeros(KMAX + 1, cfg.hidden, dtype=dtype, device=device)
        self.accepts = torch.zeros(max_cycles, **lng)  # pre-drawn simulated accept counts, one per cycle
        self.cycle = torch.zeros(1, **lng)
        self.n_last = torch.zeros(1, **lng)
        self.out = torch.zeros(max_out + 2 * KMAX + 4, **lng)
        self.out_len = torch.zeros(1, **lng)
        self.dec_tok = torch.zeros(1, **lng)
        self._snapshot: dict[str, torch.Tensor] = {}

    _STATE = ("pos", "chain", "tokens2", "hidden2", "dh", "dstep", "cycle", "n_last", "out_len", "dec_tok")

    @torch.no_grad()
    def prefill(self, prompt: torch.Tensor) -> None:
        """Process the prompt with target and draft, then set (and snapshot) the state both loops start from."""
        p = prompt.numel()
        if p < 2:
            raise ValueError("the prompt needs at least 2 tokens")
        idx = torch.arange(p, device=self.device)
        logits, h = self.target(prompt.view(1, p), idx)
        nxt = logits[-1].argmax().view(1)
        feats = torch.cat([torch.zeros_like(h[:1]), h[:-1]])  # the feature of the token at p is h[p-1]
        self.draft(prompt.view(1, p), feats, idx)
        self.pos.fill_(p)
        self.chain.zero_()
        self.chain[0:1].copy_(nxt)
        self.tokens2.copy_(torch.cat([prompt.view(-1)[-1:], nxt]))
        self.hidden2.copy_(h[-2:])
        self.dec_tok.copy_(nxt)
        for name in ("cycle", "n_last", "out_len", "dh"):
            getattr(self, name).zero_()
        self.dstep.fill_(1)
        self._snapshot = {n: getattr(self, n).clone() for n in self._STATE}

    def reset(self) -> None:
        """Back to the state right after prefill (the caches below the prompt length are never written again)."""
        for n, t in self._snapshot.items():
            getattr(self, n).copy_(t)

    # ---- the steps (each is captured as one CUDA graph on a GPU) ----
    def decode(self) -> None:
        logits, _ = self.target(self.dec_tok.view(1, 1), self.pos)
        tok = logits[-1].argmax().view(1)
        self.out.index_copy_(0, self.out_len, tok)
        self.dec_tok.copy_(tok)
        self.out_len += 1
        self.pos += 1

    def draft_first(self) -> None:
        logits, h = self.draft(self.tokens2.view(1, 2), self.hidden2, self.pos - 1 + self.ar[:2])
        self.chain[1:2].copy_(logits[-1].argmax().view(1))
        self.dh.copy_(h[-1:])
        self.dstep.fill_(1)

    def draft_step(self) -> None:
        tok = self.chain.index_select(0, self.dstep)
        logits, h = self.draft(tok.view(1, 1), self.dh, self.pos + self.dstep)
        self.chain.index_copy_(0, self.dstep + 1, logits[-1].argmax().view(1))
        self.dh.copy_(h)
        self.dstep += 1

    def verify(self, k: int) -> None:
        logits, h = self.target(self.chain[: k + 1].view(1, k + 1), self.pos + self.ar[: k + 1])
        self.g[: k + 1].copy_(logits.argmax(dim=-1))
        self.hv[: k + 1].copy_(h)

    def accept(self, k: int) -> None:
        if self.accept_mode == "simulate":
            n = self.accepts.index_select(0, self.cycle)
        else:  # real greedy acceptance: the longest prefix of drafts equal to the target's argmax
            n = (self.chain[1 : k + 1] == self.g[:k]).long().cumprod(0).sum().view(1)
        ar = self.ar[: k + 1]
        bonus = self.g[: k + 1].index_select(0, n)
        commit = torch.where(ar < n, self.chain[1 : k + 2], bonus)  # d_1..d_n, then the bonus token
        self.out.index_copy_(0, self.out_len + ar, commit)
        last = self.chain.index_select(0, n)
        hext = torch.cat([self.hidden2[1:2], self.hv[: k + 1]])  # hext[i] = feature of the token at pos+i
        self.hidden2.copy_(hext.index_select(0, torch.cat([n, n + 1])))
        self.tokens2.copy_(torch.cat([last, bonus]))
        self.chain[0:1].copy_(bonus)
        self.n_last.copy_(n)
        self.out_len += n + 1
        self.pos += n + 1  # the rewind: entries past pos+n stay in the cache but are masked until overwritten
        self.cycle += 1

    def steps(self) -> dict[str, Callable[[], None]]:
        """Every step as a no-argument callable, keyed by name (verify/accept per k)."""
        out: dict[str, Callable[[], None]] = {"decode": self.decode, "draft_first": self.draft_first,
                                              "draft_step": self.draft_step}
        for k in range(1, KMAX + 1):
            out[f"verify{k}"] = lambda k=k: self.verify(k)
            out[f"accept{k}"] = lambda k=k: self.accept(k)
        return out
