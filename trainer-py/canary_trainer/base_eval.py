"""The base model's evaluation phase, computed once per audit and shared by every run.

Every run of an audit that starts from the same base model (same model spec, revision, weights
record, device type, dtype, trainer code, library versions, CPU threads and evaluation settings)
would score the same probes to the same bytes. Each probe's result is therefore stored by content
under `$CANARY_TRAINER_CACHE/base-eval/<model key>/<probe key>.{f32,json}` (the audit's cache folder,
as for the tiny base model): the probe key adds the probe's prompt, prefill, decode modes and its
candidate list. A run evaluates only the probes missing there, under an flock of the model key's
folder (concurrent workers wait, then read), and hard-links (or copies) each score file into its own
scores/base/, so result.json and the report keep reading scores inside the run folder while the
bytes are the shared file's. A cached file whose size or sha256 is wrong is evaluated again.

`SharedBase` wraps the run's Evaluator the way lm-evaluation-harness's `CachingLM` wraps a model:
the same `run_phase`, answered from the cache, with only the missing probes passed to the
Evaluator it wraps.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import torch

from . import provenance
from .atomic import write_bytes_atomic
from .backends.base import Backend
from .bounded import read_bounded, read_text_bounded
from .cache import cache_root
from .evaluate import Evaluator, phase_entry
from .events import log
from .lock import FileLock
from .manifest import Manifest
from .manifest_types import Probe

FORMAT = "canary-audit.base-eval/1"


def _sha(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def model_key(b: Backend, m: Manifest, base_record: dict | None) -> str:
    desc = {k: v for k, v in b.describe().items() if k != "device"}
    record = {k: v for k, v in (base_record or {}).items() if k in ("kind", "cache_key")}
    return _sha({"format": FORMAT, "model": m.model, "backend": desc, "device": b.device.type, "base_model": record,
                 "eval": {k: m.eval[k] for k in ("max_new_tokens", "score_batch_size")}, "space": m.space,
                 "trainer_code_sha256": provenance.code_sha256(), "versions": provenance.versions(b.versions()),
                 "threads": torch.get_num_threads()})


def probe_key(manifest: Manifest, model: str, probe: Probe) -> str:
    cands = hashlib.sha256("\n".join(manifest.candidates(probe["canary_id"])).encode()).hexdigest()
    return _sha({"model": model, "prompt": probe["prompt"], "prefill": probe["prefill"], "decode": probe["decode"],
                 "candidates": cands})


def _load(folder: Path, key: str) -> dict | None:
    try:
        info = json.loads(read_text_bounded(folder / f"{key}.json"))
        n = info.get("n_candidates") if isinstance(info, dict) else None
        if not isinstance(n, int) or n < 0:
            return None
        data = read_bounded(folder / f"{key}.f32", 4 * n)
    except (OSError, ValueError):
        return None
    if len(data) != 4 * n or hashlib.sha256(data).hexdigest() != info.get("scores_sha256"):
        return None
    return info


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


class SharedBase:
    """The base phase of `evaluator`'s run through the audit's shared cache. Made when the phase
    runs: the model key reads the backend as it is then (its trainable parameters, the threads)."""

    def __init__(self, evaluator: Evaluator, base_record: dict | None):
        self.inner = evaluator
        self.model = model_key(evaluator.backend, evaluator.manifest, base_record)
        self.folder = cache_root() / "base-eval" / self.model

    def run_phase(self, phase: str, update: int) -> dict:
        """The base phase's entry for result.json; scores linked into the run's scores/<phase>/."""
        started = time.monotonic()
        ev, folder = self.inner, self.folder
        probes = ev.manifest.data["probes"]
        keys = [probe_key(ev.manifest, self.model, p) for p in probes]
        found = {k: i for k in keys if (i := _load(folder, k)) is not None}
        hits = len(found)
        if hits < len(keys):
            self._fill(probes, keys, found)
        ev.events.emit("eval", phase=phase, done=len(probes), total=len(probes))
        log(f"base evaluation {self.model[:12]}: {hits} of {len(probes)} probes from the shared cache {folder}")
        out = []
        for p, k in zip(probes, keys):
            info = found[k]
            _link(folder / f"{k}.f32", ev.out / "scores" / phase / f"{p['id']}.f32")
            ev.modes_used.add(info["scoring"])
            out.append({"probe_id": p["id"], "canary_id": p["canary_id"], "arm": ev.manifest.arms[p["canary_id"]],
                        "kind": p["kind"], "_name": p["id"], "scores_sha256": info["scores_sha256"],
                        "n_candidates": info["n_candidates"], "greedy": info["greedy"]})
        return phase_entry(phase, update, out, started)

    def _fill(self, probes: list[Probe], keys: list[str], found: dict) -> None:
        """Evaluate the probes not in `found` into the shared folder, under its lock."""
        ev, folder = self.inner, self.folder
        lock = FileLock(folder / ".lock", None, "the shared base evaluation")
        lock.acquire(on_wait=lambda h: log(f"base evaluation: pid {h.pid} is writing {folder}; waiting"), stop=ev.stop)
        try:
            found.update({k: i for k in keys if k not in found and (i := _load(folder, k)) is not None})
            todo = [(p, k) for p, k in zip(probes, keys) if k not in found]
            if not todo:
                return
            done = ev.evaluate([p for p, _ in todo], "base", folder, [k for _, k in todo])
            for (_, k), entry in zip(todo, done):
                info = {"format": FORMAT, "scores_sha256": entry["scores_sha256"], "n_candidates": entry["n_candidates"],
                        "greedy": entry["greedy"], "scoring": entry["_scoring"]}
                write_bytes_atomic(folder / f"{k}.json", json.dumps(info, sort_keys=True).encode())
                found[k] = info
        finally:
            lock.release()
