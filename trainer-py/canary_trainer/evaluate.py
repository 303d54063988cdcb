"""One evaluation phase (update-<n>, final; the base phase through base_eval's shared cache): score
every candidate for every probe with the scorer chosen once for the backend (scoring/), write the
float32 score files, decode greedily, and return the phase's entry for result.json."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from .atomic import write_bytes_atomic
from .backends.base import Backend
from .decode import greedy_many
from .errors import BadManifest, Interrupted
from .events import Events
from .interrupt import StopFlag
from .manifest import Manifest
from .manifest_types import Probe
from .scoring import PER_CANDIDATE, PREFIX_TREE, Scored, choose_scorer


def preflight(backend: Backend, manifest: Manifest) -> None:
    """Check before training that every probe fits the model's context with a code after it, so a
    long run cannot fail at its evaluation."""
    limit = backend.max_positions()
    if not limit:
        return
    length = manifest.space["length"]
    for i, probe in enumerate(manifest.data["probes"]):
        n = len(backend.tokenize(backend.render(probe["prompt"]) + probe["prefill"]))
        if n + length > limit:
            raise BadManifest(f"{manifest.path}: field probes[{i}].prompt: renders to {n} tokens, and with a "
                              f"{length}-character code exceeds the model's context of {limit} tokens; fix: shorten "
                              "the probe or use a model with a longer context (model.tiny.max_len)")


class Evaluator:
    def __init__(self, backend: Backend, manifest: Manifest, out: Path, events: Events, stop: StopFlag):
        self.backend = backend
        self.manifest = manifest
        self.out = out
        self.events = events
        self.stop = stop
        self.scorer = choose_scorer(backend, manifest.eval["score_batch_size"])
        self.modes_used: set[str] = set()
        # the last `evaluate` call: scoring and greedy seconds, tree groups and calls (benchmarks)
        self.stats: dict[str, float] = {}

    @property
    def scoring(self) -> str:
        """prefix-tree when every probe could use it; one per-candidate probe makes the run's label
        per-candidate, since its scores came (in part) from the slower exact path."""
        return PER_CANDIDATE if PER_CANDIDATE in self.modes_used else PREFIX_TREE

    def run_phase(self, phase: str, update: int) -> dict:
        """Evaluate every probe into scores/<phase>/ (the base phase: base_eval.SharedBase)."""
        started = time.monotonic()
        probes = self.manifest.data["probes"]
        results = self.evaluate(probes, phase, self.out / "scores" / phase, [p["id"] for p in probes])
        return phase_entry(phase, update, results, started)

    def evaluate(self, probes: list[Probe], phase: str, folder: Path, names: list[str]) -> list[dict]:
        """Scores (written to folder/<name>.f32) and greedy decodes of `probes`: result.json entries
        without scores_file (the name under `_name`), plus `_scoring`."""
        m = self.manifest
        self.backend.model.eval()
        results: list[dict] = [{} for _ in probes]
        self.events.emit("eval", phase=phase, done=0, total=len(probes))
        self.stats = {"tree_groups": 0, "tree_calls": 0}
        t0 = time.monotonic()
        try:
            for n, (i, entry) in enumerate(self._score_probes(probes, phase, folder, names)):
                results[i] = entry
                self.events.emit("eval", phase=phase, done=n + 1, total=len(probes),
                                 candidates_per_s=entry.pop("_rate"))
            t1 = time.monotonic()
            self.stats["scoring_s"] = t1 - t0
            with torch.no_grad(), self.backend.autocast():
                decoded = greedy_many(self.backend, probes, m.eval["max_new_tokens"], m.space["alphabet"],
                                      m.space["length"], self.stop, m.secrets)
            for entry, dec in zip(results, decoded):
                entry["greedy"] = dec
            self.stats["greedy_s"] = time.monotonic() - t1
        finally:
            self.backend.model.train()
        return results

    def _stop_check(self, phase: str) -> None:
        if self.stop:
            raise Interrupted(f"stopped during evaluation phase {phase} ({self.stop.reason}); "
                              "the run's next attempt continues from the newest checkpoint")

    def _score_probes(self, probes: list[Probe], phase: str, folder: Path,
                      names: list[str]) -> Iterator[tuple[int, dict]]:
        """Score every probe and write its file; yields (index, entry) as probes finish. A batching
        scorer holds consecutive probes back and scores them together (scoring.scorers.TokenTrees:
        as many per call as the memory bound allows); the others finish one by one."""
        scorer, b = self.scorer, self.backend
        scorer.begin(lambda: self._stop_check(phase))
        started = time.monotonic()  # when the scorer's pending group began
        for i, probe in enumerate(probes):
            self._stop_check(phase)
            t0 = time.monotonic()
            if not scorer.pending:
                started = t0
            candidates = self.manifest.candidates(probe["canary_id"])
            ctx_text = b.render(probe["prompt"]) + probe["prefill"]
            ctx_ids = b.tokenize(ctx_text)
            with b.autocast():
                done = scorer.add(i, ctx_text, ctx_ids, candidates)
            yield from self._finish(done, probes, folder, names, i, t0, started)
            if done and done[0].key != i:
                started = t0
        if scorer.pending:
            self._stop_check(phase)
            with b.autocast():
                done = scorer.flush()
            yield from self._finish(done, probes, folder, names, -1, 0.0, started)
        self.stats["tree_calls"] = scorer.calls

    def _finish(self, done: list[Scored], probes: list[Probe], folder: Path, names: list[str], current: int,
                t0: float, started: float) -> Iterator[tuple[int, dict]]:
        """Entries of scored probes: the probe just added alone (its rate: its candidates over its
        own wall time), or a group (each probe's rate: the group's candidates over its wall time)."""
        now = time.monotonic()
        if done and done[0].key != current:
            self.stats["tree_groups"] = self.stats.get("tree_groups", 0) + 1
        for s in done:
            self.modes_used.add(s.mode)
            seconds = now - t0 if s.key == current else (now - started) / len(done)
            yield s.key, self._entry(probes[s.key], folder, names[s.key], s.values, s.mode, seconds)

    def _entry(self, probe: Probe, folder: Path, name: str, values: np.ndarray, mode: str, seconds: float) -> dict:
        data = values.astype("<f4").tobytes()
        write_bytes_atomic(folder / f"{name}.f32", data)
        return {"probe_id": probe["id"], "canary_id": probe["canary_id"], "arm": self.manifest.arms[probe["canary_id"]],
                "kind": probe["kind"], "_name": name, "scores_sha256": hashlib.sha256(data).hexdigest(),
                "n_candidates": len(values), "_scoring": mode,
                "_rate": round(len(values) / max(seconds, 1e-9), 1)}

def phase_entry(phase: str, update: int, results: list[dict], started: float) -> dict:
    """result.json's entry of a phase from its probes' entries (scores_file from `_name`)."""
    for entry in results:
        entry["scores_file"] = f"scores/{phase}/{entry.pop('_name')}.f32"
    results = [{k: e[k] for k in ENTRY_KEYS} for e in results]
    return {"phase": phase, "update": update, "wall_s": round(time.monotonic() - started, 3), "probes": results}


ENTRY_KEYS = ("probe_id", "canary_id", "arm", "kind", "scores_file", "scores_sha256", "n_candidates", "greedy")
