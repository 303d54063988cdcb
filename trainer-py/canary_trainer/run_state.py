"""What a run has done so far, typed: the state a checkpoint's meta.json carries, so that a resumed
run continues bit for bit and labels its result exactly as an uninterrupted one would."""

from __future__ import annotations

from dataclasses import dataclass, field

from .manifest import Manifest
from .train import Totals


@dataclass
class PhaseRecord:
    """One finished evaluation phase: its result.json entry, and the scoring modes used by this
    phase and every one before it (`prefix-tree`, `per-candidate`), so that a resumed run labels
    `backend.scoring` as the uninterrupted run would."""

    entry: dict
    scoring_modes: list[str]


@dataclass
class RunState:
    at_start: dict  # provenance stamp of the run's first start; a resumed run keeps it
    base_model: dict | None = None  # result.json's backend.base_model (None: the backend has none)
    base_utility_loss: float | None = None  # utility loss of the base, before any update
    # greedy replies of the base to the utility rows (utility.metrics beyond loss), else None
    base_utility_texts: list[str] | None = None
    totals: Totals = field(default_factory=Totals)
    evaluations: list[PhaseRecord] = field(default_factory=list)

    def scoring_modes(self) -> set[str]:
        return {mode for record in self.evaluations for mode in record.scoring_modes}

    def to_meta(self, manifest: Manifest) -> dict:
        """checkpoint meta.json (checkpoint.save adds `update`)."""
        t = self.totals
        return {
            "manifest_sha256": manifest.sha256, "run_id": manifest.run_id, "at_start": self.at_start,
            "losses": t.losses, "evaluations": [r.entry for r in self.evaluations],
            "evaluation_scoring": [r.scoring_modes for r in self.evaluations],
            "train_wall_s": t.wall_s, "tokens": t.tokens, "targets": t.targets,
            "base_utility_loss": self.base_utility_loss, "base_model": self.base_model,
            **({"base_utility_texts": self.base_utility_texts} if self.base_utility_texts is not None else {}),
        }

    @classmethod
    def from_meta(cls, meta: dict) -> RunState:
        entries = [dict(e) for e in meta.get("evaluations", [])]
        # Checkpoints written before `evaluation_scoring` kept each phase's modes in a `_scoring` key.
        modes = meta.get("evaluation_scoring") or [e.get("_scoring", []) for e in entries]
        for e in entries:
            e.pop("_scoring", None)
        totals = Totals(losses=list(meta.get("losses", [])), wall_s=float(meta.get("train_wall_s", 0.0)),
                        tokens=int(meta.get("tokens", 0)), targets=int(meta.get("targets", 0)))
        return cls(at_start=meta["at_start"], base_model=meta.get("base_model"),
                   base_utility_loss=meta.get("base_utility_loss"), base_utility_texts=meta.get("base_utility_texts"),
                   totals=totals,
                   evaluations=[PhaseRecord(e, list(m)) for e, m in zip(entries, modes, strict=True)])
