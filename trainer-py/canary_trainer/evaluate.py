"""One evaluation phase (base, update-<n>, final): score every candidate for every probe, write the
float32 score files, decode greedily, and return the phase's entry for result.json."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch

from . import base_eval
from .atomic import write_bytes_atomic
from .backends.base import Backend, TreeScorer
from .decode import greedy_many
from .errors import BadManifest, Interrupted
from .events import Events
from .interrupt import StopFlag
from .manifest import Manifest
from .manifest_types import Probe
from .score import TokenCheck, score_per_candidate, score_tree
from .trie import SpanCache, TreeBatcher, code_token_lists, score_trie


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
        self.check = TokenCheck(backend)
        # token-level trees with tree attention, when the backend has them for this model
        self.tree: TreeScorer | None = backend if isinstance(backend, TreeScorer) and backend.has_tree() else None
        self.spans = SpanCache()
        self.modes_used: set[str] = set()
        self.last_mode = "prefix-tree"
        # the last `evaluate` call: scoring and greedy seconds, tree groups and calls (benchmarks)
        self.stats: dict[str, float] = {}

    def scores(self, messages: list[dict], prefill: str, candidates: list[str]) -> np.ndarray:
        """log p(candidate | probe) for each candidate, float64, in candidate order (one probe)."""
        ctx_text, ctx_ids, split = self._context(messages, prefill, candidates)
        if split is not None and self.tree is not None:
            self._mode("prefix-tree")
            with self.backend.autocast():
                return score_trie(self.tree, ctx_ids, split)
        return self._scores_without_tree(ctx_text, ctx_ids, candidates)

    def _context(self, messages: Sequence[Mapping[str, Any]], prefill: str, candidates: list[str]):
        """(context text, its tokens, the token-level tree split or None when there is no tree)."""
        b = self.backend
        ctx_text = b.render(messages) + prefill
        ctx_ids = b.tokenize(ctx_text)
        split = code_token_lists(b, ctx_text, ctx_ids, candidates, self.spans) if self.tree is not None else None
        return ctx_text, ctx_ids, split

    def _mode(self, mode: str) -> None:
        self.modes_used.add(mode)
        self.last_mode = mode

    def _scores_without_tree(self, ctx_text: str, ctx_ids: list[int], candidates: list[str]) -> np.ndarray:
        b = self.backend
        cand_tok = None if self.tree is not None else self.check.code_tokens(ctx_text, ctx_ids, candidates)
        with b.autocast():
            if cand_tok is not None:
                self._mode("prefix-tree")
                return score_tree(b, ctx_ids, cand_tok, self.manifest.eval["score_batch_size"])
            self._mode("per-candidate")
            return score_per_candidate(b, ctx_text, ctx_ids, candidates)

    @property
    def scoring(self) -> str:
        """prefix-tree when every probe could use it; one per-candidate probe makes the run's label
        per-candidate, since its scores came (in part) from the slower exact path."""
        return "per-candidate" if "per-candidate" in self.modes_used else "prefix-tree"

    def run_phase(self, phase: str, update: int, base_record: dict | None = None) -> dict:
        """Evaluate every probe; the base phase comes from the audit's shared cache (base_eval)."""
        started = time.monotonic()
        probes = self.manifest.data["probes"]
        if phase == "base":
            results = base_eval.run(self, probes, base_record)
        else:
            results = self.evaluate(probes, phase, self.out / "scores" / phase, [p["id"] for p in probes])
        for entry in results:
            entry["scores_file"] = f"scores/{phase}/{entry.pop('_name')}.f32"
        results = [{k: e[k] for k in ENTRY_KEYS} for e in results]
        return {"phase": phase, "update": update, "wall_s": round(time.monotonic() - started, 3), "probes": results}

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
                                      m.space["length"], self.stop)
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
        """Score every probe and write its file; yields (index, entry) as probes finish. Probes
        with a token-level tree are scored several at a time (trie.TreeBatcher: consecutive
        probes, as many per call as the memory bound allows), the others one by one."""
        batcher = TreeBatcher(self.tree) if self.tree is not None else None
        started = time.monotonic()  # when the batcher's pending group began
        for i, probe in enumerate(probes):
            self._stop_check(phase)
            t0 = time.monotonic()
            candidates = self.manifest.candidates(probe["canary_id"])
            ctx_text, ctx_ids, split = self._context(probe["prompt"], probe["prefill"], candidates)
            if split is None:
                values = self._scores_without_tree(ctx_text, ctx_ids, candidates)
                yield i, self._entry(probe, folder, names[i], values, self.last_mode, time.monotonic() - t0)
                continue
            assert batcher is not None  # a split exists only with a tree scorer
            if not batcher.pending:
                started = t0
            with self.backend.autocast():
                done = batcher.add(i, ctx_ids, split)
            if done:
                yield from self._finish(done, probes, folder, names, time.monotonic() - started)
                started = t0
        if batcher is not None and batcher.pending:
            self._stop_check(phase)
            with self.backend.autocast():
                done = batcher.flush()
            yield from self._finish(done, probes, folder, names, time.monotonic() - started)
        if batcher is not None:
            self.stats["tree_calls"] = batcher.calls

    def _finish(self, done, probes, folder, names, seconds: float) -> Iterator[tuple[int, dict]]:
        """Entries of a scored group; each probe's rate is the group's candidates over its wall time."""
        self._mode("prefix-tree")
        self.stats["tree_groups"] = self.stats.get("tree_groups", 0) + 1
        for i, values in done:
            yield i, self._entry(probes[i], folder, names[i], values, "prefix-tree", seconds / len(done))

    def _entry(self, probe: Probe, folder: Path, name: str, values: np.ndarray, mode: str, seconds: float) -> dict:
        data = values.astype("<f4").tobytes()
        write_bytes_atomic(folder / f"{name}.f32", data)
        return {"probe_id": probe["id"], "canary_id": probe["canary_id"], "arm": self.manifest.arms[probe["canary_id"]],
                "kind": probe["kind"], "_name": name, "scores_sha256": hashlib.sha256(data).hexdigest(),
                "n_candidates": len(values), "_scoring": mode,
                "_rate": round(len(values) / max(seconds, 1e-9), 1)}

ENTRY_KEYS = ("probe_id", "canary_id", "arm", "kind", "scores_file", "scores_sha256", "n_candidates", "greedy")
