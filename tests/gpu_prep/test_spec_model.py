"""Correctness of the speculative loop on the CPU: one-forward verify, KV-cache rewind, bonus token, greedy equality."""

from __future__ import annotations

import numpy as np
import pytest
import torch


def _engine(spec_model, mode="simulate", seed=3, max_cycles=200):
    eng = spec_model.SpecEngine(spec_model.TINY, max_len=96, max_out=48, max_cycles=max_cycles, dtype=torch.float64,
                                device=torch.device("cpu"), seed=seed, accept_mode=mode)
    prompt = torch.randint(0, spec_model.TINY.vocab, (12,), generator=torch.Generator().manual_seed(seed))
    eng.prefill(prompt)
    return eng, prompt


def _plain(eng, n):
    eng.reset()
    with torch.no_grad():
        for _ in range(n):
            eng.decode()
    return eng.out[:n].tolist()


def test_verify_one_forward_equals_sequential_decodes(spec_model):
    eng, _ = _engine(spec_model)
    k = 4
    eng.chain[1 : k + 1] = torch.tensor([5, 17, 200, 9])
    with torch.no_grad():
        eng.verify(k)
        together = eng.g[: k + 1].clone()
        eng.reset()
        eng.chain[1 : k + 1] = torch.tensor([5, 17, 200, 9])
        chain = eng.chain[: k + 1].clone()
        one_by_one, pos = [], int(eng.pos)
        for i in range(k + 1):
            logits, _ = eng.target(chain[i].view(1, 1), torch.tensor([pos + i]))
            one_by_one.append(int(logits[-1].argmax()))
    assert together.tolist() == one_by_one


def test_verify_logits_match_sequential(spec_model):
    eng, _ = _engine(spec_model)
    toks = torch.tensor([[7, 8, 9]])
    with torch.no_grad():
        base = int(eng.pos)
        batch, hb = eng.target(toks, torch.arange(base, base + 3))
        seq = [eng.target(toks[:, i : i + 1], torch.tensor([base + i]))[0][-1] for i in range(3)]
    assert torch.allclose(batch, torch.stack(seq), atol=1e-10)
    assert hb.shape == (3, spec_model.TINY.hidden)


@pytest.mark.parametrize("k", [1, 4])
def test_greedy_spec_loop_reproduces_plain_decoding(spec_model, validation, k):
    eng, _ = _engine(spec_model, mode="greedy")
    want = _plain(eng, 40)
    run = validation.Runner(eng, graphs=False)
    _, tokens, cycles = run.run_spec(k, 40, None, sync=True)
    assert tokens >= 40 and cycles >= 1
    assert eng.out[:40].tolist() == want


def test_oracle_drafts_are_accepted_up_to_the_first_wrong_one(spec_model):
    """Drafts set to the target's own greedy tokens (one corrupted) must be accepted exactly up to the corruption."""
    eng, _ = _engine(spec_model, mode="greedy")
    want = _plain(eng, 40)
    eng.reset()
    k, p0, produced, seen = 4, int(eng.pos), 0, []
    wrong_at = [0, 3, 1, 5, 2, 5, 4, 5, 5, 5]  # index of the corrupted draft (5 = none corrupted)
    with torch.no_grad():
        for w in wrong_at:
            if produced + k + 1 > 40:
                break
            base = int(eng.pos) - p0 - 1  # out index of the token at pos+1 is pos−p0−1+... = base + i for draft i
            drafts = [want[base + i] for i in range(1, k + 1)]
            if w < k:
                drafts[w] = (drafts[w] + 1) % spec_model.TINY.vocab
            eng.chain[1 : k + 1] = torch.tensor(drafts)
            eng.verify(k)
            eng.accept(k)
            n = int(eng.n_last)
            seen.append(n)
            assert n == min(w, k)
            produced += n + 1
    assert eng.out[:produced].tolist() == want[:produced]
    assert sum(seen) > 10  # the chains really were accepted, not just rejected at once


def _cache(eng, upto):
    return torch.stack([torch.stack([b.k_cache[..., :upto, :], b.v_cache[..., :upto, :]]) for b in eng.target.blocks])


def test_rewind_leaves_the_cache_of_the_committed_sequence(spec_model, validation):
    """After simulated cycles with random accept counts, the KV cache below pos equals a fresh prefill of the tokens."""
    eng, prompt = _engine(spec_model, mode="simulate")
    run = validation.Runner(eng, graphs=False)
    acc = validation.draw_accepts(0.6, 3, 200, np.random.default_rng(1))
    _, tokens, cycles = run.run_spec(3, 30, acc, sync=True)
    assert tokens == int(acc[:cycles].sum()) + cycles
    with torch.no_grad():  # one more cycle that rejects every draft: 3 stale entries past the new pos
        eng.accepts[cycles] = 0
        eng.draft_first()
        for _ in range(2):
            eng.draft_step()
        eng.verify(3)
        eng.accept(3)
    out_len, pos = int(eng.out_len), int(eng.pos)
    assert out_len == tokens + 1 and pos == prompt.numel() + out_len
    assert int(eng.chain[0]) == int(eng.out[out_len - 1])  # the bonus is the next token to process
    first = eng._snapshot["chain"][:1]  # the prefill's argmax, at position P (never part of `out`)
    committed = torch.cat([prompt, first, eng.out[: out_len - 1]])  # positions 0..pos−1
    fresh, _ = _engine(spec_model, mode="simulate")
    with torch.no_grad():
        fresh.target(committed.view(1, -1), torch.arange(pos))
    assert torch.allclose(_cache(eng, pos), _cache(fresh, pos), atol=1e-10)
    stale = _cache(eng, pos + 3)[..., pos:, :]
    assert stale.abs().sum() > 0  # rejected drafts are still in the cache (rewind = move pos, not erase) ...
    with torch.no_grad():  # ... yet the next forward sees exactly what a clean cache gives
        a, _ = eng.target(eng.chain[:1].view(1, 1), eng.pos.clone())
        b, _ = fresh.target(eng.chain[:1].view(1, 1), torch.tensor([pos]))
    assert torch.allclose(a, b, atol=1e-10)


def test_draw_accepts_hits_the_accept_length(validation):
    from specdoctor.tools.breakeven.breakeven import alpha_from_accept_length

    rng = np.random.default_rng(0)
    for k, tau in [(1, 1.5), (3, 2.5), (5, 4.0), (2, 3.0)]:
        n = validation.draw_accepts(alpha_from_accept_length(tau, k), k, 20000, rng)
        assert n.min() >= 0 and n.max() <= k
        assert abs((n + 1).mean() - tau) < 0.03 * tau
