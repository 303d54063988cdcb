"""The one contract of candidate scoring: a `CandidateScorer` takes probes in order (their context
text and tokens, and the candidate codes) and hands back each probe's scores, log p(code | probe)
float64 in candidate order, with the path that produced them. A scorer may hold probes back to
score several together (`pending`); `flush` scores what it holds. Callers choose the precision
(inside backend.autocast() or not)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

# The labels result.json's backend.scoring and each phase's scoring modes use.
PREFIX_TREE = "prefix-tree"
PER_CANDIDATE = "per-candidate"


@dataclass
class Scored:
    key: int  # the caller's key of the probe (its index in the phase)
    values: np.ndarray  # (C,) float64, candidate order
    mode: str  # PREFIX_TREE or PER_CANDIDATE: how these values were computed
    group: int  # probes scored together in this call (1: alone)


class CandidateScorer(Protocol):
    @property
    def pending(self) -> bool:
        """Whether probes are held back, waiting for `flush` or a later `add`."""
        ...

    @property
    def calls(self) -> int:
        """Batched model calls made so far (benchmarks; 0 for scorers that do not batch)."""
        ...

    def begin(self, stop: Callable[[], None] | None = None) -> None:
        """A new phase starts (a batching scorer re-reads its memory bound here); `stop` raises to
        interrupt, and a batching scorer calls it between its model calls."""
        ...

    def add(self, key: int, ctx_text: str, ctx_ids: list[int], candidates: list[str]) -> list[Scored]:
        """Take one probe; return the probes finished by this call (this one, or a group it closed)."""
        ...

    def flush(self) -> list[Scored]:
        """Score every probe held back."""
        ...
