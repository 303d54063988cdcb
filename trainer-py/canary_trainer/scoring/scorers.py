"""The candidate scorers (scoring/base.py's `CandidateScorer`) and the choice between them, made
once per evaluator from what the backend declares:

- `TokenTrees`: the backend has tree attention for this model (`Backend.tree_scorer()`): any
  tokenizer, each probe's candidates as a token-level prefix tree of their in-context tokens,
  consecutive probes batched into one call within the memory bound (tree.TreeBatcher); a probe
  whose candidates do not split into in-context tokens falls back to per-candidate scoring.
- `CharacterTrees`: otherwise, when every candidate is one token per character after the context
  (walk.TokenCheck), the prefix tree walked level by level on one shared prompt cache
  (walk.score_tree); else per-candidate.
- `PerCandidate`: each candidate as its own sequence (walk.score_per_candidate), exact under any
  tokenizer; the fallback of both.
"""

from __future__ import annotations

from typing import Callable, cast

import numpy as np

from ..backends.base import Backend, TreeScorer
from .base import PER_CANDIDATE, PREFIX_TREE, CandidateScorer, Scored
from .tree import SpanCache, TreeBatcher, code_token_lists
from .walk import TokenCheck, score_per_candidate, score_tree


class PerCandidate:
    pending = False
    calls = 0

    def __init__(self, backend: Backend):
        self.backend = backend
        self.stop: Callable[[], None] | None = None

    def begin(self, stop: Callable[[], None] | None = None) -> None:
        self.stop = stop

    def add(self, key: int, ctx_text: str, ctx_ids: list[int], candidates: list[str]) -> list[Scored]:
        values = score_per_candidate(self.backend, ctx_text, ctx_ids, candidates, stop=self.stop)
        return [Scored(key, values, PER_CANDIDATE, 1)]

    def flush(self) -> list[Scored]:
        return []


class CharacterTrees:
    pending = False
    calls = 0

    def __init__(self, backend: Backend, nodes_per_pass: int):
        self.backend, self.nodes_per_pass = backend, nodes_per_pass
        self.check = TokenCheck(backend)
        self.fallback = PerCandidate(backend)
        self.stop: Callable[[], None] | None = None

    def begin(self, stop: Callable[[], None] | None = None) -> None:
        self.stop = stop
        self.fallback.begin(stop)

    def add(self, key: int, ctx_text: str, ctx_ids: list[int], candidates: list[str]) -> list[Scored]:
        cand_tok = self.check.code_tokens(ctx_text, ctx_ids, candidates)
        if cand_tok is None:
            return self.fallback.add(key, ctx_text, ctx_ids, candidates)
        values = score_tree(self.backend, ctx_ids, cand_tok, self.nodes_per_pass, self.stop)
        return [Scored(key, values, PREFIX_TREE, 1)]

    def flush(self) -> list[Scored]:
        return []


class TokenTrees:
    def __init__(self, backend: Backend, tree: TreeScorer):
        self.backend, self.tree = backend, tree
        self.batcher = TreeBatcher(tree)
        self.spans = SpanCache()  # kept across phases: many probes share a context tail
        self.fallback = PerCandidate(backend)

    @property
    def pending(self) -> bool:
        return bool(self.batcher.pending)

    @property
    def calls(self) -> int:
        return self.batcher.calls

    def begin(self, stop: Callable[[], None] | None = None) -> None:
        # The memory bound is read again: what the process can still use changes as it trains.
        self.batcher = TreeBatcher(self.tree, stop=stop)
        self.fallback.begin(stop)

    def add(self, key: int, ctx_text: str, ctx_ids: list[int], candidates: list[str]) -> list[Scored]:
        split = code_token_lists(self.backend, ctx_text, ctx_ids, candidates, self.spans)
        if split is None:
            return self.fallback.add(key, ctx_text, ctx_ids, candidates)
        return self._scored(self.batcher.add(key, ctx_ids, split))

    def flush(self) -> list[Scored]:
        return self._scored(self.batcher.flush())

    @staticmethod
    def _scored(done: list[tuple[object, np.ndarray]]) -> list[Scored]:
        return [Scored(cast(int, key), values, PREFIX_TREE, len(done)) for key, values in done]


def choose_scorer(backend: Backend, nodes_per_pass: int) -> CandidateScorer:
    """The scorer of an evaluator, from what the backend declares (see the module docstring)."""
    tree = backend.tree_scorer()
    if tree is not None:
        return TokenTrees(backend, tree)
    return CharacterTrees(backend, nodes_per_pass)
