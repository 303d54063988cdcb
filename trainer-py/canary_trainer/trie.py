"""Token-level prefix trees: candidates scored by the tree of their in-context tokenizations.

Each candidate's tokens are those the tokenizer gives the code *inside* the context (context +
code tokenized together, then the span after the context's tokens), so any tokenizer works: one
token per digit (Qwen3), digit groups ("4821" -> "482" + "1", Llama 3, GPT-OSS), words of an
alphanumeric code. Depths are ragged. A node is a distinct proper prefix of some candidate's tokens;
each node needs one next-token distribution, and every candidate sharing the prefix reuses it.

A backend that implements `tree_logprobs` evaluates a whole chunk of nodes in one forward call on
top of the prompt's cache (tree attention); chunks are sized by the backend's memory bound
(`tree_node_budget`), and a chunk re-creates the few ancestors it shares with the previous one.
"""

from __future__ import annotations

import numpy as np
import torch

from .backends import Backend
from .score import _context_tail

VERIFY = 8  # candidates whose tail tokenization is checked against the whole context's
_SPANS: dict[int, dict] = {}  # per backend: many probes share a context tail and a candidate list


def code_token_lists(backend: Backend, ctx_text: str, ctx_ids: list[int],
                     candidates: list[str]) -> tuple[int, list[list[int]]] | None:
    """(k, spans): every candidate tokenized together with the context keeps the context's first
    k tokens, and spans[i] is candidate i's tokens after them. k is the context's length unless a
    candidate merges across the boundary (" is" + "x" -> " isx"-like merges): then the tree's root is
    the shorter shared prefix and the context's own last tokens are scored as one more path (its
    score is subtracted: log p(context + code) - log p(context), as per-candidate scoring does).
    None when the context's first token changes. Spans are read from a short context tail
    (tokenizers are local); a few candidates are checked against the whole context, and on any
    difference the whole context is used."""
    tail_text, tail_ids = _context_tail(backend, ctx_text, ctx_ids)
    head = len(ctx_ids) - len(tail_ids)
    key = (tail_text, hash(tuple(candidates)))
    cache = _SPANS.setdefault(id(backend), {})
    if key not in cache:
        if len(cache) > 64:
            cache.clear()
        cache[key] = _spans(backend, tail_text, tail_ids, candidates)
    got = cache[key]
    if got is not None and tail_text != ctx_text:
        k, spans = got[0] + head, got[1]
        step = max(1, len(candidates) // VERIFY)
        picked = list(range(0, len(candidates), step))[:VERIFY]
        full = backend.tokenize_batch([ctx_text + candidates[i] for i in picked])
        if all(f == ctx_ids[:k] + spans[i] for f, i in zip(full, picked)):
            return k, spans
    elif got is not None:
        return got
    return _spans(backend, ctx_text, ctx_ids, candidates)


def _spans(backend: Backend, text: str, ids: list[int], candidates: list[str]) -> tuple[int, list[list[int]]] | None:
    seqs = backend.tokenize_batch([text + c for c in candidates])
    k = len(ids)
    for toks in seqs:
        j = 0
        while j < min(k, len(toks)) and toks[j] == ids[j]:
            j += 1
        k = j
    if k == 0:
        return None
    spans = [toks[k:] for toks in seqs]
    return (k, spans) if all(spans) else None


class Chunk:
    """A trie over some candidates: fed nodes (token, parent, depth; parents first, -1 is the
    prompt) and every candidate's edges as (node before the token, token)."""

    def __init__(self):
        self.index: dict[tuple[int, int], int] = {}
        self.token: list[int] = []
        self.parent: list[int] = []
        self.depth: list[int] = []
        self.rows: list[int] = []  # candidate row of each edge
        self.before: list[int] = []
        self.next: list[int] = []

    def add(self, row: int, seq: list[int]) -> None:
        node = -1
        for i, tok in enumerate(seq):
            self.rows.append(row)
            self.before.append(node)
            self.next.append(tok)
            if i == len(seq) - 1:
                break
            key = (node, tok)
            child = self.index.get(key)
            if child is None:
                child = len(self.token)
                self.index[key] = child
                self.token.append(tok)
                self.parent.append(node)
                self.depth.append(0 if node < 0 else self.depth[node] + 1)
            node = child


def build_chunks(spans: list[list[int]], budget: int) -> list[Chunk]:
    """Candidates in token order, cut into tries of at most `budget` fed nodes (a candidate alone
    may exceed it)."""
    order = sorted(range(len(spans)), key=lambda r: spans[r])
    chunks = [Chunk()]
    for r in order:
        seq = spans[r]
        cur = chunks[-1]
        if cur.token and len(cur.token) + len(seq) - 1 > budget:
            cur = Chunk()
            chunks.append(cur)
        cur.add(r, seq)
    return chunks


@torch.no_grad()
def score_trie(backend: Backend, ctx_ids: list[int], split: tuple[int, list[list[int]]]) -> np.ndarray:
    """log p(code | context) for each candidate, float64, in candidate order, from
    `code_token_lists`' (k, spans)."""
    k, spans = split
    if k == len(ctx_ids):
        return _score_paths(backend, ctx_ids, spans)
    both = _score_paths(backend, ctx_ids[:k], spans + [ctx_ids[k:]])
    return both[:-1] - both[-1]


def _score_paths(backend: Backend, ctx_ids: list[int], spans: list[list[int]]) -> np.ndarray:
    state = backend.prefix(ctx_ids)
    root = state.next_logprobs.double().cpu()
    budget = backend.tree_node_budget(state, max(len(s) for s in spans))
    total = torch.zeros(len(spans), dtype=torch.float64)
    dev = backend.device
    for chunk in build_chunks(spans, budget):
        before = torch.tensor(chunk.before, dtype=torch.long)
        nxt = torch.tensor(chunk.next, dtype=torch.long)
        edge_lp = torch.empty(len(before), dtype=torch.float64)
        at_root = before < 0
        edge_lp[at_root] = root[nxt[at_root]]
        if chunk.token:
            inner = ~at_root
            t = [torch.tensor(x, device=dev) for x in (chunk.token, chunk.parent, chunk.depth)]
            lp = backend.tree_logprobs(state, *t, before[inner].to(dev), nxt[inner].to(dev))
            edge_lp[inner] = lp.double().cpu()
        total.index_add_(0, torch.tensor(chunk.rows, dtype=torch.long), edge_lp)
    return total.numpy()
