"""Resumable checkpoints in <out>/checkpoints/update-NNNNNN/, each written as a whole folder under
a temporary name and renamed into place, so a folder that exists is complete. The newest two are
kept: if the newest turns out unreadable, the one before it still resumes the run.

Every checkpoint ends with hashes.json, written after its other files: the sha256 of each of them.
Loading checks them first, so a file changed or cut short after it was written (a bad disk, a copy
gone wrong, a flipped byte that torch would still load) is never resumed from: the checkpoint is
skipped, the one before it is tried, and each skip is reported with its reason (`skipped`).

A checkpoint holds the trainable weights, the optimizer, the RNG states and the run's bookkeeping
(loss curve, evaluations done so far, the start stamp), so a resumed run continues bit for bit.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .atomic import write_dir_atomic

KEEP = 2
HASHES = "hashes.json"
_FILES = ("weights.pt", "optimizer.pt", "meta.json")
_NAME = re.compile(r"^update-(\d{6,})$")


@dataclass
class Saved:
    """A checkpoint read back: meta is the run state's meta.json (see run_state.RunState)."""

    update: int
    weights: dict[str, torch.Tensor]
    optimizer: dict
    rng: dict
    meta: dict


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checkpoint_dir(out: Path, update: int) -> Path:
    return out / "checkpoints" / f"update-{update:06d}"


def _load(path: Path) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:  # torch without the weights_only argument
        return torch.load(path, map_location="cpu")


def save(out: Path, update: int, weights: dict, optimizer: dict, rng: dict, meta: dict) -> Path:
    """Write checkpoint `update` (meta gains `update`) and drop all but the newest KEEP."""
    target = checkpoint_dir(out, update)

    def fill(tmp: Path) -> None:
        torch.save(weights, tmp / "weights.pt")
        torch.save({"optimizer": optimizer, "rng": rng}, tmp / "optimizer.pt")
        (tmp / "meta.json").write_text(json.dumps({**meta, "update": update}, indent=1) + "\n")
        record_hashes(tmp)  # last: a checkpoint whose hashes.json is present was written completely

    write_dir_atomic(target, fill)
    existing = list_updates(out)
    for old in existing[:-KEEP]:
        shutil.rmtree(checkpoint_dir(out, old), ignore_errors=True)
    return target


def list_updates(out: Path) -> list[int]:
    root = out / "checkpoints"
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        m = _NAME.match(child.name)
        if m and child.is_dir():
            found.append(int(m.group(1)))
    return sorted(found)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record_hashes(path: Path) -> None:
    """Write hashes.json of the checkpoint folder `path`: the sha256 of each of its files."""
    hashes = {name: _sha256(path / name) for name in _FILES}
    (path / HASHES).write_text(json.dumps({"sha256": hashes}, indent=1) + "\n")


def verify(path: Path) -> str | None:
    """Why the checkpoint folder `path` must not be resumed from, or None when every file still has
    the content hashes.json recorded when it was written."""
    try:
        recorded = json.loads((path / HASHES).read_text())["sha256"]
    except FileNotFoundError:
        return f"{HASHES} is missing (the checkpoint cannot be verified)"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{HASHES} is unreadable ({exc})"
    for name in _FILES:
        want = recorded.get(name) if isinstance(recorded, dict) else None
        if not isinstance(want, str):
            return f"{HASHES} records no hash of {name}"
        try:
            got = _sha256(path / name)
        except OSError as exc:
            return f"{name} cannot be read ({exc.strerror or exc})"
        if got != want:
            size = (path / name).stat().st_size
            return f"{name} changed after it was written (sha256 {got[:12]}…, recorded {want[:12]}…; {size} bytes)"
    return None


def load_newest(out: Path, manifest_sha256: str, skipped: list[dict] | None = None) -> Saved | None:
    """The newest intact checkpoint of this manifest, or None. Checkpoints of another manifest
    are passed over silently (they belong to a different run); a checkpoint of this manifest that
    fails its content hashes or does not load is appended to `skipped` as {update, reason}."""
    for update in reversed(list_updates(out)):
        path = checkpoint_dir(out, update)
        try:
            meta = json.loads((path / "meta.json").read_text())
        except (OSError, ValueError):
            meta = None
        if isinstance(meta, dict) and meta.get("manifest_sha256") != manifest_sha256:
            continue
        reason = verify(path)
        if reason is None and not isinstance(meta, dict):
            reason = "meta.json is not a JSON object"
        if reason is None and isinstance(meta, dict):
            try:
                weights = _load(path / "weights.pt")
                rest = _load(path / "optimizer.pt")
            except (OSError, ValueError, RuntimeError, EOFError, KeyError) as exc:
                reason = f"does not load ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
            else:
                return Saved(update, weights, rest["optimizer"], rest["rng"], meta)
        if skipped is not None:
            skipped.append({"update": update, "reason": reason or "unreadable"})
    return None


def clear(out: Path) -> None:
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
