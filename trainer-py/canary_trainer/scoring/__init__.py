"""Candidate scoring: one `CandidateScorer` contract (base.py), its implementations chosen once from
what the backend declares (scorers.py), the per-character prefix walk and per-candidate scoring
(walk.py), token-level prefix trees batched across probes (tree.py)."""

from .base import PER_CANDIDATE, PREFIX_TREE, CandidateScorer, Scored
from .scorers import choose_scorer

__all__ = ["PER_CANDIDATE", "PREFIX_TREE", "CandidateScorer", "Scored", "choose_scorer"]
