"""Candidate scoring: log p(code | probe) for every candidate code, summed over the code's tokens.

Fast path (prefix tree): run the probe once, keep its cache, then walk the candidates level by
level. Level l holds the distinct length-l prefixes (for four digits: 1, 10, 100, 1000 nodes), and
each node needs one next-token distribution, so 10,000 codes cost 1,111 node evaluations that all
share the prompt instead of 10,000 full sequences. It is valid only when every candidate tokenizes
as the context's tokens followed by one token per character; that is checked, not assumed
(`code_tokens`). Otherwise each candidate is scored as its own sequence (`score_per_candidate`).
Callers choose the precision (inside backend.autocast() or not).
"""

from __future__ import annotations

from typing import Callable, Protocol

import numpy as np
import torch

from ..backends.base import PrefixScorer, TextModel, TrainableModel
from ..batches import right_pad

MIN_TAIL_CHARS = 8
MAX_TAIL_CHARS = 64


def context_tail(backend: TextModel, ctx_text: str, ctx_ids: list[int]) -> tuple[str, list[int]]:
    """The shortest tail of the context (at least MIN_TAIL_CHARS characters) that tokenizes on its
    own exactly as it does inside the full context: a cut where the context's tokens already
    break, so text before it cannot merge with what follows. Tokenizers are local (a boundary can
    only change tokens near it), so a candidate appended to this tail tokenizes as it does after
    the whole context (callers verify a few against the whole context). The shortest clean tail
    is what probes of one run share ("Reference code: " rather than the last line with the
    canary's own name in it), so one tokenization of the candidates serves all of them. Falls back
    to the whole context when no clean cut is found within MAX_TAIL_CHARS."""
    start = len(ctx_text) - MIN_TAIL_CHARS
    for cut in range(start, max(0, len(ctx_text) - MAX_TAIL_CHARS) - 1, -1):
        if cut <= 0:
            break
        tail = backend.tokenize(ctx_text[cut:])
        # The tail must end the context's tokens; only then is the (long) head tokenized.
        if len(tail) > len(ctx_ids) or ctx_ids[len(ctx_ids) - len(tail):] != tail:
            continue
        if backend.tokenize(ctx_text[:cut]) + tail == ctx_ids:
            return ctx_text[cut:], tail
    return ctx_text, ctx_ids


class TokenCheck:
    """Caches the per-character split check; many probes share the same context tail."""

    def __init__(self, backend: TextModel):
        self.backend = backend
        self._cache: dict[tuple, np.ndarray | None] = {}

    def code_tokens(self, ctx_text: str, ctx_ids: list[int], candidates: list[str]) -> np.ndarray | None:
        """(C, L) token ids when every candidate is one token per character after the context,
        else None (use per-candidate scoring)."""
        b = self.backend
        alphabet = sorted({ch for c in candidates for ch in c})
        char_tok: dict[str, int] = {}
        for ch in alphabet:
            ids = b.tokenize(ctx_text + ch)
            if len(ids) != len(ctx_ids) + 1 or ids[:-1] != ctx_ids:
                return None
            char_tok[ch] = ids[-1]
        lengths = {len(c) for c in candidates}
        if len(lengths) != 1:
            return None
        tail_text, tail_ids = context_tail(b, ctx_text, ctx_ids)
        key = (tail_text, tuple(sorted(char_tok.items())), hash(tuple(candidates)))
        if key not in self._cache:
            ok = True
            for c, toks in zip(candidates, b.tokenize_batch([tail_text + c for c in candidates])):
                if toks[: len(tail_ids)] != tail_ids or toks[len(tail_ids):] != [char_tok[ch] for ch in c]:
                    ok = False
                    break
            self._cache[key] = (np.array([[char_tok[ch] for ch in c] for c in candidates], dtype=np.int64)
                                if ok else None)
        return self._cache[key]


class _Scorer(TextModel, TrainableModel, Protocol):
    """What per-candidate scoring needs: the tokenizer and full forward passes."""


def _row_index(table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Index in `table` (unique rows, lexicographically sorted) of each row of `rows`."""
    if table.shape[1] == 0:
        return np.zeros(len(rows), dtype=np.int64)
    # View each row as one structured scalar so searchsorted compares whole rows.
    dt = np.dtype([("f%d" % i, table.dtype) for i in range(table.shape[1])])
    t = np.ascontiguousarray(table).view(dt).reshape(-1)
    r = np.ascontiguousarray(rows).view(dt).reshape(-1)
    idx = np.searchsorted(t, r)
    if not np.array_equal(table[idx], rows):
        raise AssertionError("prefix tree: a node without its parent")
    return idx.astype(np.int64)


@torch.no_grad()
def score_tree(backend: PrefixScorer, ctx_ids: list[int], cand_tok: np.ndarray, nodes_per_pass: int,
               stop: Callable[[], None] | None = None) -> np.ndarray:
    """Scores (C,) float64 of candidates given as per-character token ids (C, L); `stop` (raises to
    interrupt) is called before every pass."""
    n_cand, length = cand_tok.shape
    state = backend.prefix(ctx_ids)
    total = np.zeros(n_cand, dtype=np.float64)
    carry, prev_nodes = None, None
    for level in range(length):
        cols = np.unique(cand_tok[:, level])
        col_of = np.searchsorted(cols, cand_tok[:, level])
        if level == 0:
            lp = state.next_logprobs[torch.as_tensor(cols, device=state.next_logprobs.device)]
            lp = lp.double().cpu().numpy()[None, :]
            node_of = np.zeros(n_cand, dtype=np.int64)
        else:
            nodes, node_of = np.unique(cand_tok[:, :level], axis=0, return_inverse=True)
            node_of = node_of.reshape(-1)
            parent_of = None
            if prev_nodes is not None:
                # Both levels are sorted lexicographically, so a parent is found by binary search.
                parent_of = _row_index(prev_nodes, nodes[:, :-1])
            cols_t = torch.as_tensor(cols, device=backend.device)
            parts, carries = [], []
            for s in range(0, len(nodes), nodes_per_pass):
                if stop is not None:
                    stop()
                paths = torch.as_tensor(nodes[s: s + nodes_per_pass], device=backend.device)
                parents = None if parent_of is None else torch.as_tensor(parent_of[s: s + nodes_per_pass],
                                                                         device=backend.device)
                lp_part, c = backend.extend(state, paths, cols_t, carry=carry, parent_of=parents)
                parts.append(lp_part.double().cpu())
                carries.append(c)
            lp = torch.cat(parts).numpy()
            carry = backend.join_carry(carries) if carries[0] is not None else None
            prev_nodes = nodes
        total += lp[node_of, col_of]
    return total


@torch.no_grad()
def score_per_candidate(backend: _Scorer, ctx_text: str, ctx_ids: list[int], candidates: list[str],
                        batch: int = 64, stop: Callable[[], None] | None = None) -> np.ndarray:
    """One full sequence per candidate: score = log p(context + code) - log p(context), both under
    the tokenizer's own split (so a token merging across the boundary is handled exactly); `stop`
    (raises to interrupt) is called before every batch."""
    seqs = backend.tokenize_batch([ctx_text + c for c in candidates])
    starts = []
    for seq in seqs:
        k = 0
        while k < min(len(seq), len(ctx_ids)) and seq[k] == ctx_ids[k]:
            k += 1
        if k == 0:
            raise ValueError("a candidate changes the context's first token; cannot score it")
        starts.append(k)
    scores: np.ndarray = np.zeros(len(candidates), dtype=np.float64)
    ctx_lp: np.ndarray | None = None
    if min(starts) < len(ctx_ids):
        ids = torch.tensor([ctx_ids], dtype=torch.long, device=backend.device)
        lp = torch.log_softmax(backend.logits(ids)[0].float(), dim=-1)
        ctx_lp = lp[:-1].gather(1, ids[0, 1:, None])[:, 0].double().cpu().numpy()  # log p(ctx[t+1] | ctx[:t+1])
    for s in range(0, len(seqs), batch):
        if stop is not None:
            stop()
        chunk = seqs[s: s + batch]
        ids = right_pad(chunk, backend.pad_id).to(backend.device)
        width = ids.shape[1]
        first = min(starts[s: s + batch]) - 1  # earliest position whose prediction is needed
        logits = backend.logits(ids, keep_last=width - first)
        lp = torch.log_softmax(logits.float(), dim=-1)  # (B, T-first, V)
        for r, q in enumerate(chunk):
            k = starts[s + r]
            pos = torch.arange(k - 1, len(q) - 1, device=lp.device) - first
            tgt = ids[r, k: len(q)]
            value = float(lp[r, pos, tgt].double().sum())
            if k < len(ctx_ids):
                assert ctx_lp is not None  # computed above whenever a start is inside the context
                value -= float(ctx_lp[k - 1:].sum())
            scores[s + r] = value
    return scores
