"""Token-level prefix trees: candidates scored by the tree of their in-context tokenizations.

Each candidate's tokens are those the tokenizer gives the code *inside* the context (context +
code tokenized together, then the span after the context's tokens), so any tokenizer works: one
token per digit (Qwen3), digit groups ("4821" -> "482" + "1", Llama 3, GPT-OSS), words of an
alphanumeric code. Depths are ragged. A node is a distinct proper prefix of some candidate's tokens;
each node needs one next-token distribution, and every candidate sharing the prefix reuses it.

A backend that implements `tree_logprobs` evaluates the trees of several probes in one forward
call on top of their prompts' caches (tree attention). `TreeBatcher` groups consecutive probes
while the backend's estimate of the call (`tree_call_bytes`) stays within its memory bound
(`tree_limit`); a probe too large alone is cut into chunks that fit, and a chunk re-creates the
few ancestors it shares with the previous one. On the CPU a call is also capped at
`CPU_NODES_PER_CALL` fed nodes (probes x their widest tree), so that one call, which a stop
request must wait for, takes bounded time; batching gains nothing there (bench/results/
2026-12-01-trainer-scoring-probes-batched.md). A `stop` callable, checked before every prompt
and tree call, lets the caller interrupt a group between calls.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ..backends.base import TextModel, TreeScorer
from .walk import context_tail

VERIFY = 8  # candidates whose tail tokenization is checked against the whole context's
SPANS_KEPT = 64  # context tails remembered (many probes share a context tail and a candidate list)
# Fed nodes per tree call on the CPU (probes x their widest tree): about 3 probes of a four-digit
# tree (1,111 nodes), a few seconds a call on the hf test models (docs/trainer.md, stop requests).
CPU_NODES_PER_CALL = 4096

Split = tuple[int, list[list[int]]]


class SpanCache:
    """`code_token_lists` by (context tail, candidate list), for one backend's tokenizer: held by
    whoever scores with that backend (the evaluator), never shared across backends."""

    def __init__(self) -> None:
        self.spans: dict[tuple[str, int], Split | None] = {}


def code_token_lists(backend: TextModel, ctx_text: str, ctx_ids: list[int],
                     candidates: list[str], cache: SpanCache | None = None) -> Split | None:
    """(k, spans): every candidate tokenized together with the context keeps the context's first
    k tokens, and spans[i] is candidate i's tokens after them. k is the context's length unless a
    candidate merges across the boundary (" is" + "x" -> " isx"-like merges): then the tree's root is
    the shorter shared prefix and the context's own last tokens are scored as one more path (its
    score is subtracted: log p(context + code) - log p(context), as per-candidate scoring does).
    None when the context's first token changes. Spans are read from a short context tail
    (tokenizers are local); a few candidates are checked against the whole context, and on any
    difference the whole context is used."""
    tail_text, tail_ids = context_tail(backend, ctx_text, ctx_ids)
    head = len(ctx_ids) - len(tail_ids)
    key = (tail_text, hash(tuple(candidates)))
    memo = (cache or SpanCache()).spans
    if key not in memo:
        if len(memo) > SPANS_KEPT:
            memo.clear()
        memo[key] = _spans(backend, tail_text, tail_ids, candidates)
    got = memo[key]
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


def _spans(backend: TextModel, text: str, ids: list[int], candidates: list[str]) -> Split | None:
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

    def __init__(self) -> None:
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


class _Probe:
    """One probe's tree: its prompt (the context's first k tokens), the spans below it (plus the
    context's own last tokens when k is shorter: subtracted), and its whole trie."""

    def __init__(self, key: object, ctx_ids: list[int], split: Split) -> None:
        k, spans = split
        self.key = key
        self.prompt = ctx_ids[:k]
        self.subtract = k < len(ctx_ids)
        self.spans = spans + [ctx_ids[k:]] if self.subtract else spans
        self.whole = _whole_trie(spans, tuple(ctx_ids[k:]), self.spans)


_TRIES: dict[int, tuple[list[list[int]], tuple[int, ...], Chunk]] = {}


def _whole_trie(spans: list[list[int]], rest: tuple[int, ...], paths: list[list[int]]) -> Chunk:
    """One probe's whole trie, built once per candidate set: probes whose spans are the same list
    (code_token_lists' cache: one tokenization per shared context tail) and whose context ends in
    the same tokens after the root share one trie (read-only while scoring)."""
    hit = _TRIES.get(id(spans))
    if hit is not None and hit[0] is spans and hit[1] == rest:
        return hit[2]
    whole = build_chunks(paths, 1 << 62)[0]
    if len(_TRIES) >= 16:
        _TRIES.clear()
    _TRIES[id(spans)] = (spans, rest, whole)
    return whole


class TreeBatcher:
    """Scores probes' trees several at a time: probes are added in order, and consecutive ones
    share a group (their prompts run together, then their trees in one tree-attention call) while
    the group stays within the backend's memory bound (`tree_call_bytes` <= `tree_limit`), at
    most `max_probes` when set, and at most `max_nodes` fed nodes (probes x widest tree; default
    CPU_NODES_PER_CALL on the CPU, unbounded elsewhere). A probe whose tree alone exceeds either
    bound runs alone, its tree cut into chunks that fit. `stop` (raises to interrupt) is called
    before every prompt and tree call. `add` and `flush` return the finished probes as (key,
    scores): log p(code | context) float64 in candidate order."""

    def __init__(self, backend: TreeScorer, max_probes: int | None = None, max_nodes: int | None = None,
                 stop: Callable[[], None] | None = None):
        self.backend = backend
        self.max_probes = max_probes
        if max_nodes is None and backend.device.type == "cpu":
            max_nodes = CPU_NODES_PER_CALL
        self.max_nodes = max_nodes
        self.stop = stop
        self.limit = backend.tree_limit()
        self.pending: list[_Probe] = []
        self.calls = 0  # tree-attention calls made (benchmarks)

    def fits(self, probes: list[_Probe]) -> bool:
        """Whether these probes' trees score in one call within the memory bound."""
        if self.max_probes is not None and len(probes) > self.max_probes:
            return False
        widest = max(len(p.whole.token) for p in probes)
        if self.max_nodes is not None and len(probes) * widest > self.max_nodes:
            return False
        nbytes = self.backend.tree_call_bytes(len(probes), max(len(p.prompt) for p in probes), widest)
        return nbytes <= self.limit

    def check(self) -> None:
        if self.stop is not None:
            self.stop()

    def add(self, key: object, ctx_ids: list[int], split: Split) -> list[tuple[object, np.ndarray]]:
        probe = _Probe(key, ctx_ids, split)
        if not self.pending or self.fits(self.pending + [probe]):
            self.pending.append(probe)
            return []
        done = self.flush()
        self.pending = [probe]
        return done

    def flush(self) -> list[tuple[object, np.ndarray]]:
        group, self.pending = self.pending, []
        return _score_group(self, group) if group else []


def _row_budget(batcher: TreeBatcher, probe: _Probe) -> int:
    """Most fed nodes of one probe's chunk within the memory bound and `max_nodes` (at least 1)."""
    lo, hi = 1, max(min(len(probe.whole.token), batcher.max_nodes or len(probe.whole.token)), 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if batcher.backend.tree_call_bytes(1, len(probe.prompt), mid) <= batcher.limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


@torch.no_grad()
def _score_group(batcher: TreeBatcher, group: list[_Probe]) -> list[tuple[object, np.ndarray]]:
    backend = batcher.backend
    dev = backend.device
    batcher.check()
    state = backend.tree_prompts([p.prompt for p in group])
    root = state.next_logprobs.double().cpu()  # (P, V)
    if len(group) == 1 and not batcher.fits(group):
        chunks = [build_chunks(group[0].spans, _row_budget(batcher, group[0]))]
    else:
        chunks = [[p.whole] for p in group]
    totals = [torch.zeros(len(p.spans), dtype=torch.float64) for p in group]
    for c in range(max(len(x) for x in chunks)):
        part = [(b, x[c]) for b, x in enumerate(chunks) if c < len(x)]
        width = max(len(ch.token) for _, ch in part)
        tokens = torch.zeros(len(group), max(width, 1), dtype=torch.long)
        parent = torch.full(tokens.shape, -1, dtype=torch.long)
        depth = torch.zeros(tokens.shape, dtype=torch.long)
        rows, cols, inner_of = [], [], []
        for b, ch in part:
            n = len(ch.token)
            tokens[b, :n] = torch.tensor(ch.token, dtype=torch.long)
            parent[b, :n] = torch.tensor(ch.parent, dtype=torch.long)
            depth[b, :n] = torch.tensor(ch.depth, dtype=torch.long)
            before = torch.tensor(ch.before, dtype=torch.long)
            nxt = torch.tensor(ch.next, dtype=torch.long)
            at_root = before < 0
            edge_lp = torch.empty(len(before), dtype=torch.float64)
            edge_lp[at_root] = root[b, nxt[at_root]]
            inner = ~at_root
            rows.append(before[inner] + b * tokens.shape[1])
            cols.append(nxt[inner])
            inner_of.append((b, ch, edge_lp, inner))
        lp = torch.empty(0, dtype=torch.float64)
        if width:
            batcher.check()
            lp = backend.tree_logprobs(state, tokens.to(dev), parent.to(dev), depth.to(dev),
                                       torch.cat(rows).to(dev), torch.cat(cols).to(dev)).double().cpu()
            batcher.calls += 1
        at = 0
        for b, ch, edge_lp, inner in inner_of:
            m = int(inner.sum())
            edge_lp[inner] = lp[at: at + m]
            at += m
            totals[b].index_add_(0, torch.tensor(ch.rows, dtype=torch.long), edge_lp)
    out = []
    for p, total in zip(group, totals):
        values = total.numpy()
        out.append((p.key, values[:-1] - values[-1] if p.subtract else values))
    return out


@torch.no_grad()
def score_trie(backend: TreeScorer, ctx_ids: list[int], split: Split) -> np.ndarray:
    """log p(code | context) for each candidate, float64, in candidate order, from
    `code_token_lists`' (k, spans): one probe alone."""
    batcher = TreeBatcher(backend)
    batcher.add(0, ctx_ids, split)
    return batcher.flush()[0][1]
