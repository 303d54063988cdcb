"""Resumable checkpoints in <out>/checkpoints/update-NNNNNN/, each written as a whole folder under
a temporary name and renamed into place, so a folder that exists is complete. The newest two are
kept: if the newest turns out unreadable, the one before it still resumes the run.

A checkpoint holds the trainable weights, the optimizer, the RNG states and the run's bookkeeping
(loss curve, evaluations done so far, the start stamp), so a resumed run continues bit for bit.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .atomic import write_dir_atomic

KEEP = 2
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


def load_newest(out: Path, manifest_sha256: str) -> Saved | None:
    """The newest readable checkpoint of this manifest, or None. Checkpoints of another manifest
    are skipped (they belong to a different run)."""
    for update in reversed(list_updates(out)):
        path = checkpoint_dir(out, update)
        try:
            meta = json.loads((path / "meta.json").read_text())
            if meta.get("manifest_sha256") != manifest_sha256:
                continue
            weights = _load(path / "weights.pt")
            rest = _load(path / "optimizer.pt")
        except (OSError, ValueError, RuntimeError, EOFError):
            continue
        return Saved(update, weights, rest["optimizer"], rest["rng"], meta)
    return None


def clear(out: Path) -> None:
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
