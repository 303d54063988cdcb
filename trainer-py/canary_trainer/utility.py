"""Utility generation: greedy replies to the utility rows' prompts, from the base and the final model.

When the manifest's `utility.metrics` names anything besides `loss`, every utility row's prompt is
rendered with the assistant turn opened (like a free-mode probe) and decoded greedily until an
end-of-turn / eos token or `utility.max_new_tokens`, batched by the same machinery as probes
(greedy_batch.run_batched, with no early-stop rule). The replies are written to
`utility/base.jsonl` and `utility/final.jsonl` in the run's output folder, one line per row in file
order: {"i": row i, "text": reply without its end-of-turn marker}. The controller scores them
against the rows' targets (accuracy, exact match, token F1); the trainer computes no metric.

The base replies are computed once per audit like the base evaluation phase (base_eval.py): stored
under `$CANARY_TRAINER_CACHE/base-eval/<model key>/utility-<key>.json`, the key adding the utility
file's sha256 and count and the generation limit to the model key, so another utility file or
another model never reuses them.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import torch

from . import base_eval
from .atomic import write_bytes_atomic
from .backends.base import Backend
from .bounded import read_text_bounded
from .cache import cache_root
from .events import log
from .greedy_batch import run_batched
from .interrupt import StopFlag
from .lock import FileLock
from .manifest import Manifest

BASE_FILE = "utility/base.jsonl"
FINAL_FILE = "utility/final.jsonl"
FORMAT = "canary-audit.utility-outputs/1"


def requests(backend: Backend, rows: list[dict], max_new_tokens: int) -> list[tuple]:
    """(context ids, limit, no stop rule) per row: the prompt rendered with the generation prompt."""
    return [(backend.tokenize(backend.render(row["prompt"])), max_new_tokens, None) for row in rows]


def decode_rows(backend: Backend, rows: list[dict], max_new_tokens: int, stop: StopFlag | None = None) -> list[str]:
    """Greedy reply of each row's prompt, batched (equal to one row at a time)."""
    if not rows:
        return []
    t0 = time.monotonic()
    backend.model.eval()
    try:
        with torch.no_grad(), backend.autocast():
            outs = run_batched(backend, requests(backend, rows, max_new_tokens), stop)
    finally:
        backend.model.train()
    texts = [backend.decode(ids) for ids in outs]
    log(f"utility: decoded {len(rows)} rows (at most {max_new_tokens} new tokens) in {time.monotonic() - t0:.2f} s")
    return texts


def encode_lines(rows: list[dict], texts: list[str]) -> bytes:
    """The bytes of an outputs file (ASCII JSON lines, so any reply round-trips)."""
    return "".join(json.dumps({"i": row["i"], "text": text}) + "\n" for row, text in zip(rows, texts, strict=True)).encode()


def write_outputs(out: Path, rel: str, rows: list[dict], texts: list[str]) -> dict:
    """Write one outputs file atomically; result.json's {path, sha256, count}."""
    data = encode_lines(rows, texts)
    write_bytes_atomic(out / rel, data)
    return {"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "count": len(texts)}


def cache_key(model_key: str, manifest: Manifest, max_new_tokens: int) -> str:
    u = manifest.data["utility"]
    material = {"format": FORMAT, "model": model_key, "utility_sha256": u["sha256"], "count": u["count"],
                "max_new_tokens": max_new_tokens}
    return hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _load(path: Path, count: int) -> list[str] | None:
    try:
        info = json.loads(read_text_bounded(path))
    except (OSError, ValueError):
        return None
    texts = info.get("texts") if isinstance(info, dict) else None
    if not isinstance(info, dict) or info.get("format") != FORMAT or not isinstance(texts, list) or len(texts) != count \
            or not all(isinstance(t, str) for t in texts):
        return None
    digest = hashlib.sha256(json.dumps(texts).encode()).hexdigest()
    return texts if digest == info.get("sha256") else None


def base_texts(backend: Backend, manifest: Manifest, stop: StopFlag, rows: list[dict], max_new_tokens: int,
               base_record: dict | None) -> list[str]:
    """The base model's replies, from the audit's shared cache when another run already decoded
    them (same model key, same utility file, same limit), else decoded here and stored."""
    model = base_eval.model_key(backend, manifest, base_record)
    folder = cache_root() / "base-eval" / model
    path = folder / f"utility-{cache_key(model, manifest, max_new_tokens)}.json"
    texts = _load(path, len(rows))
    if texts is None:
        lock = FileLock(folder / ".lock", None, "the shared base evaluation")
        lock.acquire(on_wait=lambda h: log(f"utility: pid {h.pid} is writing {folder}; waiting"), stop=stop)
        try:
            texts = _load(path, len(rows))
            if texts is None:
                texts = decode_rows(backend, rows, max_new_tokens, stop)
                info = {"format": FORMAT, "texts": texts, "sha256": hashlib.sha256(json.dumps(texts).encode()).hexdigest()}
                write_bytes_atomic(path, json.dumps(info).encode())
                return texts
        finally:
            lock.release()
    log(f"utility: base replies of {len(rows)} rows from the shared cache {path}")
    return texts
