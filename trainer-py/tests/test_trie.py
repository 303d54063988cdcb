"""Token-level prefix trees (tree attention over the shared prompt cache) equal per-candidate
scoring for every tokenizer family: one token per digit (Qwen3), digit groups with ragged depths
(Llama 3, GPT-OSS), sampled decoys, an alphanumeric code space, a prompt longer than the sliding
window, and chunks cut small by the memory bound; and so do several probes' trees batched into one
call (prompts of different lengths, left-padded), whether the memory bound takes them all in one
call, splits them into groups, or cuts a lone probe's tree into chunks."""

import random

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from canary_trainer.scoring.tree import TreeBatcher, build_chunks, code_token_lists, score_trie  # noqa: E402
from canary_trainer.scoring.walk import score_per_candidate  # noqa: E402

from .fixtures import canary_prefill, canary_prompt  # noqa: E402
from .hf_fixtures import hub_env  # noqa: E402,F401  (fixture)
from .test_hf_backend import backend  # noqa: E402

FAMILIES = ["qwen3", "llama3", "gptoss"]
ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def _context(b, long=False, ident="Ada Lovelace #0"):
    prompt = canary_prompt(ident, "[redacted]")
    if long:  # past GPT-OSS's 64-token sliding window in the test model
        prompt = [{"role": "user", "content": prompt[0]["content"] + " Keep it short and friendly." * 12}]
    ctx = b.render(prompt) + canary_prefill(ident)
    return ctx, b.tokenize(ctx)


def _sampled(alphabet, length, n, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(length)) for _ in range(n)]


def _check(b, ctx, ids, codes, mem_bytes=None):
    split = code_token_lists(b, ctx, ids, codes)
    assert split is not None
    b.mem_bytes = mem_bytes
    try:
        fast = score_trie(b, ids, split)
    finally:
        b.mem_bytes = None
    slow = score_per_candidate(b, ctx, ids, codes, batch=128)
    assert np.max(np.abs(fast - slow)) < 1e-4
    return split


@pytest.mark.parametrize("family", FAMILIES)
def test_trie_equals_per_candidate_on_sampled_four_digit_decoys(hub_env, family):
    b = backend(family)
    ctx, ids = _context(b)
    codes = _sampled("0123456789", 4, 300, seed=1) + ["4821", "0000", "9999"]
    k, spans = _check(b, ctx, ids, codes)
    assert k == len(ids)
    depths = {len(s) for s in spans}
    assert depths == ({4} if family == "qwen3" else {2}), depths  # "4821" -> "482" + "1" when grouped


@pytest.mark.parametrize("family", FAMILIES)
def test_trie_on_an_alphanumeric_space_with_ragged_depths(hub_env, family):
    b = backend(family)
    ctx, ids = _context(b, long=True)
    codes = _sampled(ALNUM, 6, 200, seed=2)
    k, spans = _check(b, ctx, ids, codes, mem_bytes=1 << 22)  # several chunks
    assert k < len(ids)  # " " + letters merge across the boundary: the root is shorter
    assert len({len(s) for s in spans}) > 1


def _batched(b, probes, mem_bytes):
    """Scores of `probes` [(ids, split)] through one TreeBatcher under `mem_bytes`: (scores by
    probe, tree-attention calls, probes per group)."""
    b.mem_bytes = mem_bytes
    try:
        batcher = TreeBatcher(b)
        out, groups = {}, []
        for i, probe in enumerate(probes + [None]):  # None: the end, flush
            done = batcher.add(i, *probe) if probe else batcher.flush()
            if done:
                groups.append(len(done))
                out.update(done)
    finally:
        b.mem_bytes = None
    return out, batcher.calls, groups


@pytest.mark.parametrize("family", FAMILIES)
def test_probes_batched_across_calls_equal_per_candidate(hub_env, family):
    b = backend(family)
    specs = [(dict(), _sampled("0123456789", 4, 120, seed=3) + ["4821", "0000"]),
             (dict(long=True), _sampled(ALNUM, 6, 80, seed=4)),  # ragged depths, root before the boundary
             (dict(ident="Grace Brewster Murray Hopper #12"), _sampled("0123456789", 4, 100, seed=5)),
             (dict(long=True, ident="Edsger Dijkstra #3"), _sampled("0123456789", 4, 60, seed=6))]
    probes, expected = [], []
    for kw, codes in specs:
        ctx, ids = _context(b, **kw)
        split = code_token_lists(b, ctx, ids, codes)
        assert split is not None
        probes.append((ids, split))
        expected.append(score_per_candidate(b, ctx, ids, codes, batch=128))
    lengths = [len(ids) for ids, _ in probes]
    assert len(set(lengths)) == len(lengths)  # every prompt length differs: left padding
    assert any(k < len(ids) for ids, (k, _) in probes) and any(k == len(ids) for ids, (k, _) in probes)
    if family == "gptoss":
        assert max(lengths) > 64 > min(lengths)  # the sliding window cuts some prompts, not others
    nodes = max(len(build_chunks(s if k == len(ids) else s + [ids[k:]], 1 << 30)[0].token) for ids, (k, s) in probes)
    roots = max(k for _, (k, _) in probes)
    two = b.tree_call_bytes(2, roots, nodes)  # a bound that holds two probes per call, not four
    assert b.tree_call_bytes(4, roots, nodes) > two
    for mem_bytes, want in ((None, [4]), (two, [2, 2]), (1 << 22, [1, 1, 1, 1])):
        got, calls, groups = _batched(b, probes, mem_bytes)
        assert groups == want, (mem_bytes, groups)
        assert calls >= len(groups) and (calls > 4 if mem_bytes == 1 << 22 else calls == len(groups))
        for i, slow in enumerate(expected):
            assert np.max(np.abs(got[i] - slow)) < 1e-4, (mem_bytes, i)


def test_trie_chunks_respect_the_node_budget():
    spans = [[1, 2, 3], [1, 2, 4], [1, 5], [6, 7, 8, 9], [6]]
    chunks = build_chunks(spans, budget=3)
    assert all(len(c.token) <= 3 for c in chunks)
    assert sorted(r for c in chunks for r in set(c.rows)) == list(range(5))


def test_prompt_cache_is_shared_not_modified(hub_env):
    b = backend("gptoss")
    ctx, ids = _context(b, long=True)
    state = b.prefix(ids)
    before = [t.clone() for layer in state.cache.layers for t in (layer.keys, layer.values)]
    with torch.no_grad():
        b.tree_logprobs(state, torch.tensor([5, 6, 7]), torch.tensor([-1, 0, 1]), torch.tensor([0, 1, 2]),
                        torch.tensor([0, 2]), torch.tensor([8, 9]))
    after = [t for layer in state.cache.layers for t in (layer.keys, layer.values)]
    assert all(torch.equal(x, y) for x, y in zip(before, after))
    # Batched: two prompts (one past the sliding window, one not), left-padded; nothing stored.
    group = b.tree_prompts([ids, ids[:40]])
    held = [(layer.keys, layer.values) for layer in group.cache.layers]
    before = [t.clone() for kv in held for t in kv]
    with torch.no_grad():
        lp = b.tree_logprobs(group, torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([[-1, 0, 1], [-1, 0, -1]]),
                             torch.tensor([[0, 1, 2], [0, 1, 0]]), torch.tensor([0, 2, 3, 4]), torch.tensor([8, 9, 8, 9]))
    assert [(layer.keys, layer.values) for layer in group.cache.layers] == held  # the same tensors
    assert all(torch.equal(x, y) for x, y in zip(before, [t for kv in held for t in kv]))
    with torch.no_grad():  # each row as its own probe
        one = b.tree_logprobs(b.prefix(ids), torch.tensor([5, 6, 7]), torch.tensor([-1, 0, 1]), torch.tensor([0, 1, 2]),
                              torch.tensor([0, 2]), torch.tensor([8, 9]))
        two = b.tree_logprobs(b.prefix(ids[:40]), torch.tensor([5, 6]), torch.tensor([-1, 0]), torch.tensor([0, 1]),
                              torch.tensor([0, 1]), torch.tensor([8, 9]))
    assert torch.allclose(lp, torch.cat([one, two]), atol=1e-5)
