"""Resumable checkpoints in <out>/checkpoints/update-NNNNNN/, each written as a whole folder under
a temporary name and renamed into place, so a folder that exists is complete. The newest two are
kept: if the newest turns out unreadable, the one before it still resumes the run.

Every checkpoint ends with hashes.json, written after its other files: the sha256 and the size of
each of them. Loading opens each file once through the trainer's read bound (bounded.py: no link,
no FIFO, a regular file no larger than recorded), hashes it and loads it from that same handle. It
checks the hashes first, so a file changed or cut short after it was written (a bad disk, a copy
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
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import torch

from .atomic import write_dir_atomic
from .bounded import MAX_CHECKPOINT_FILE_BYTES, BoundedStream, BoundError, open_bounded, read_text_bounded

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


def _load(stream: BoundedStream) -> Any:
    try:
        return torch.load(stream, map_location="cpu", weights_only=False)
    except TypeError:  # torch without the weights_only argument
        stream.seek(0)
        return torch.load(stream, map_location="cpu")


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


def _sha256(stream: BinaryIO | BoundedStream) -> str:
    h = hashlib.sha256()
    for block in iter(lambda: stream.read(1 << 20), b""):
        h.update(block)
    return h.hexdigest()


def record_hashes(path: Path) -> None:
    """Write hashes.json of the checkpoint folder `path`: the sha256 and size of each of its files
    (the size bounds what a later load reads of that file)."""
    hashes = {}
    for name in _FILES:
        with open(path / name, "rb") as f:
            hashes[name] = _sha256(f)
    sizes = {name: (path / name).stat().st_size for name in _FILES}
    (path / HASHES).write_text(json.dumps({"sha256": hashes, "bytes": sizes}, indent=1) + "\n")


def _open_verified(path: Path, stack: ExitStack) -> tuple[str | None, dict[str, BoundedStream]]:
    """(why the checkpoint folder `path` must not be resumed from, or None; its files opened once
    each, hashed and rewound, for loading from the same handles). Every file is read through the
    bound (bounded.py): a link, a FIFO or a file larger than hashes.json records is refused before
    a byte of it is hashed."""
    try:
        recorded_all = json.loads(read_text_bounded(path / HASHES))
    except FileNotFoundError:
        return f"{HASHES} is missing (the checkpoint cannot be verified)", {}
    except BoundError as exc:
        return f"{HASHES} {exc}", {}
    except (OSError, ValueError) as exc:
        return f"{HASHES} is unreadable ({exc})", {}
    recorded = recorded_all.get("sha256") if isinstance(recorded_all, dict) else None
    if not isinstance(recorded, dict):
        return f"{HASHES} is unreadable (no sha256 object)", {}
    sizes = recorded_all.get("bytes")
    sizes = sizes if isinstance(sizes, dict) else {}  # checkpoints written before sizes were recorded
    streams: dict[str, BoundedStream] = {}
    for name in _FILES:
        want = recorded.get(name)
        if not isinstance(want, str):
            return f"{HASHES} records no hash of {name}", {}
        bound = sizes.get(name)
        bound = bound if isinstance(bound, int) and bound >= 0 else MAX_CHECKPOINT_FILE_BYTES
        try:
            stream = stack.enter_context(open_bounded(path / name, bound))
            got = _sha256(stream)
        except BoundError as exc:
            return f"{name} {exc}", {}
        except OSError as exc:
            return f"{name} cannot be read ({exc.strerror or exc})", {}
        if got != want:
            return (f"{name} changed after it was written (sha256 {got[:12]}…, recorded {want[:12]}…; "
                    f"{stream.size} bytes)"), {}
        stream.seek(0)
        streams[name] = stream
    return None, streams


def verify(path: Path) -> str | None:
    """Why the checkpoint folder `path` must not be resumed from, or None when every file still has
    the content hashes.json recorded when it was written."""
    with ExitStack() as stack:
        return _open_verified(path, stack)[0]


def load_newest(out: Path, manifest_sha256: str, skipped: list[dict] | None = None) -> Saved | None:
    """The newest intact checkpoint of this manifest, or None. Checkpoints of another manifest
    are passed over silently (they belong to a different run); a checkpoint of this manifest that
    fails its content hashes or does not load is appended to `skipped` as {update, reason}."""
    for update in reversed(list_updates(out)):
        path = checkpoint_dir(out, update)
        try:
            meta = json.loads(read_text_bounded(path / "meta.json"))
        except (OSError, ValueError):
            meta = None
        if isinstance(meta, dict) and meta.get("manifest_sha256") != manifest_sha256:
            continue
        with ExitStack() as stack:
            reason, streams = _open_verified(path, stack)
            if reason is None:
                try:  # meta as hashed, from the same handle (the read above only chose the manifest)
                    meta = json.loads(streams["meta.json"].read().decode("utf-8"))
                except ValueError:
                    meta = None
            if reason is None and not isinstance(meta, dict):
                reason = "meta.json is not a JSON object"
            if reason is None and isinstance(meta, dict):
                try:
                    weights = _load(streams["weights.pt"])
                    rest = _load(streams["optimizer.pt"])
                except (OSError, ValueError, RuntimeError, EOFError, KeyError) as exc:
                    reason = f"does not load ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
                else:
                    return Saved(update, weights, rest["optimizer"], rest["rng"], meta)
        if skipped is not None:
            skipped.append({"update": update, "reason": reason or "unreadable"})
    return None


def clear(out: Path) -> None:
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
