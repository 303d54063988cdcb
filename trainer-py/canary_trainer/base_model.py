"""The base model a run fine-tunes, put in place before anything reads the weights (`prepare_base`):
the hf backend's loaded weights as they are; the tiny backend's random initialisation, or that
initialisation pretrained on `model.tiny.pretrain.rows` and cached by content.

Why pretrain: the reference study fine-tunes pretrained LMs, which already copy a code shown in
their input, and its headline contrasts depend on it. A tiny model trained from scratch inside one
run cannot copy; a base pretrained on rows that show a code and start the reply with it can. The
trainer decides nothing about those rows: it trains on them in order, exactly like fine-tuning.

The base weights are a pure function of the key material below, so they are built once per key and
stored in `$CANARY_TRAINER_CACHE/tiny-base/<key>.pt` (default `~/.cache/canary-audit`), written
atomically. Concurrent trainers serialise on an flock of `<key>.lock`: one builds, the others wait
(and honour a stop while waiting), then load. A waiter emits `wait` events that name the builder's
run (its id is in the lock file), and one when the wait ends. Pretraining is not checkpointed: it
is short, and an interrupted one restarts. A cache file that fails its checks is rebuilt.

Pretraining runs the fine-tuning loop (train.train_updates).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import time
from dataclasses import replace
from pathlib import Path

import torch

from . import provenance
from .atomic import write_bytes_atomic
from .backends.base import Backend
from .backends.tiny import init_seed
from .batches import encode_rows
from .bounded import MAX_CHECKPOINT_FILE_BYTES, BoundError, read_bounded
from .cache import cache_root
from .errors import Diverged, Interrupted
from .events import Events, log
from .images import check_rows
from .interrupt import StopFlag
from .lock import FileLock, Holder
from .manifest import Manifest
from .memory import micro_batch_size
from .result import thin_curve
from .rows import read_rows
from .train import Totals, make_optimizer, train_updates

FORMAT = "canary-audit.tiny-base/1"
RANDOM = {"kind": "random"}


def key_material(manifest: Manifest, device: torch.device, threads: int | None = None) -> dict:
    """Everything the base weights depend on. Besides what defines the computation (architecture,
    init seed (the pretraining's own when it fixes one, so runs of every seed share the base; else
    the run's, keyed as before that option), rows by hash, pretraining and optimizer settings, the
    trainer's code), the host properties that change floating-point results: torch version, device
    type, CPU threads and the micro-batch split. Not the vision stem's `freeze`: it governs
    fine-tuning only, so a frozen and a trained stem fine-tune the same base."""
    spec = manifest.pretrain
    assert spec is not None
    tiny: dict = {k: v for k, v in manifest.model["tiny"].items() if k != "pretrain"}
    if "vision" in tiny:
        tiny["vision"] = {k: v for k, v in tiny["vision"].items() if k != "freeze"}
    tr = manifest.training
    return {
        "format": FORMAT,
        "architecture": tiny,
        "init_seed": init_seed(manifest.model),
        "pretrain": {**{k: v for k, v in spec.items() if k not in ("rows", "init_seed")},
                     "rows_sha256": spec["rows"]["sha256"],
                     "rows_count": spec["rows"]["count"]},
        "optimizer": {"betas": list(tr.betas), "weight_decay": tr.weight_decay, "grad_clip": tr.grad_clip},
        "trainer_code_sha256": provenance.code_sha256(),
        "torch": torch.__version__,
        "device": device.type,
        "threads": threads if threads is not None else torch.get_num_threads(),
        "micro_batch": micro_batch_size(spec["batch_size"]),
    }


def cache_key(material: dict) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def weights_digest(state: dict[str, torch.Tensor]) -> str:
    """sha256 over names, dtypes, shapes and bytes: catches a damaged file that still unpickles."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def _torch_load(data: bytes) -> dict:
    try:  # the cache folder may be shared: never unpickle arbitrary objects from it
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except TypeError:  # torch without weights_only
        return torch.load(io.BytesIO(data), map_location="cpu")


def load_cached(path: Path, key: str, model: torch.nn.Module, report: bool = True) -> dict | None:
    """Load a cached base into `model` and return its build info, or None when the file is absent
    or fails a check (then the model is untouched and the caller rebuilds; `report` logs why)."""
    try:
        data = read_bounded(path, MAX_CHECKPOINT_FILE_BYTES)
    except FileNotFoundError:
        return None
    except BoundError as exc:
        if report:
            log(f"base model cache {path} {exc}; rebuilding it")
        return None
    except OSError as exc:
        if report:
            log(f"base model cache {path} unreadable ({exc.strerror}); rebuilding it")
        return None
    try:
        blob = _torch_load(data)
        problem = None
        if not isinstance(blob, dict) or blob.get("format") != FORMAT or blob.get("key") != key:
            problem = "not a base of this key"
        else:
            state = blob["state_dict"]
            own = model.state_dict()
            if set(state) != set(own) or any(state[k].shape != own[k].shape for k in own):
                problem = "weights do not fit the model"
            elif weights_digest(state) != blob["digest"]:
                problem = "weights digest mismatch"
            else:
                info = json.loads(blob["info_json"])
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a damaged file
        problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if problem is not None:
        if report:
            log(f"base model cache {path} is damaged ({problem}); rebuilding it")
        return None
    model.load_state_dict(state, strict=True)
    return info


def save_cached(path: Path, key: str, material: dict, model: torch.nn.Module, info: dict) -> None:
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    # Everything but the tensors as JSON text: torch 1.13's weights-only loader reads strings and
    # tensors but not pickled floats.
    blob = {"format": FORMAT, "key": key, "material_json": json.dumps(material, sort_keys=True), "state_dict": state,
            "digest": weights_digest(state), "info_json": json.dumps(info)}
    buf = io.BytesIO()
    torch.save(blob, buf)
    write_bytes_atomic(path, buf.getvalue())


def pretrain(backend: Backend, manifest: Manifest, events: Events, stop: StopFlag) -> dict:
    """Train the freshly initialised model on the pretraining rows, in order, like fine-tuning;
    step events carry phase "pretrain". Returns the build info stored with the cached weights."""
    spec = manifest.pretrain
    assert spec is not None
    ref = spec["rows"]
    rows_path = manifest.resolve(ref["path"], "model.tiny.pretrain.rows.path")
    rows = read_rows(rows_path, ref["sha256"], ref["count"], "model.tiny.pretrain.rows")
    check_rows(rows, rows_path, manifest.image_sizes)
    # The model's context is the row limit here: it is part of the key, so a cached base and a
    # built one accept the same rows (training.max_length governs fine-tuning rows only).
    encoded = encode_rows(backend, rows, manifest.model["tiny"]["max_len"], rows_path)
    del rows
    cfg = replace(manifest.training, lr=spec["lr"], schedule=spec["schedule"], batch_size=spec["batch_size"],
                  updates=spec["updates"])
    torch.manual_seed(spec["seed"])  # the pretraining's dropout stream
    optimizer = make_optimizer(backend, cfg)
    backend.model.train()
    totals = Totals()

    def stopped(done: int) -> Interrupted:
        return Interrupted(f"stopped while pretraining the base model, after update {done} of {spec['updates']} "
                           f"({stop.reason}); pretraining is not checkpointed and restarts on the next attempt")

    try:
        train_updates(backend, optimizer, encoded, cfg, totals, events, stop, stopped, phase="pretrain")
    except Diverged as exc:
        raise Diverged(f"pretraining the base model: {exc.message} (model.tiny.pretrain.lr)") from exc
    for p in backend.model.parameters():
        p.grad = None
    return {"updates": spec["updates"], "final_loss": totals.losses[-1], "build_wall_s": round(totals.wall_s, 3),
            "loss_curve": thin_curve(totals.losses), "built_by": f"{socket.gethostname()}:{os.getpid()}",
            "built_at": round(time.time(), 3)}


def frozen_in_finetuning(manifest: Manifest) -> bool:
    """Whether fine-tuning leaves part of the model as the base's: the tiny VLM's stem with
    `model.tiny.vision.freeze`."""
    tiny = manifest.model.get("tiny")
    return bool(tiny and tiny.get("vision") and tiny["vision"].get("freeze", False))


def freeze_for_finetuning(backend: Backend, manifest: Manifest) -> int:
    """After the base is in place and before the optimizer is made: stop training what the
    manifest freezes (the vision stem's parameters stop requiring gradients, so the optimizer,
    gradient clipping and checkpoints see the rest only). Returns the number of frozen values."""
    if not frozen_in_finetuning(manifest):
        return 0
    stem = backend.model.vision  # model.tiny.vision builds one
    n = 0
    for p in stem.parameters():
        p.requires_grad_(False)
        n += p.numel()
    log(f"vision stem frozen for fine-tuning ({n} parameters keep the base's values)")
    return n


def prepare_base(backend: Backend, manifest: Manifest, events: Events, stop: StopFlag) -> dict | None:
    """Put the base weights into `backend.model` before anything reads them (the base evaluation,
    the utility loss, fine-tuning) and return result.json's `backend.base_model`: None for the hf
    backend (the weights its constructor loaded), the tiny backend's random initialisation, or its
    pretrained base from the cache (built on a miss)."""
    if backend.name != "tiny":
        return None
    return obtain(backend, manifest, events, stop)


def obtain(backend: Backend, manifest: Manifest, events: Events, stop: StopFlag) -> dict:
    """Put the tiny base into backend.model and return result.json's `backend.base_model`."""
    if manifest.pretrain is None:
        return dict(RANDOM)
    t0 = time.monotonic()
    material = key_material(manifest, backend.device)
    key = cache_key(material)
    path = cache_root() / "tiny-base" / f"{key}.pt"
    # Unlocked first look: files appear by atomic rename, so a hit needs no lock. A damaged file
    # is reported (and rebuilt) under the lock, where another trainer may already have replaced it.
    info = load_cached(path, key, backend.model, report=False)
    from_cache = info is not None
    if info is None:
        info, from_cache = _load_or_build(backend, manifest, events, stop, path, material)
    wall = time.monotonic() - t0
    log(f"base model {key[:12]}: " + (f"loaded from cache {path} in {wall:.1f} s" if from_cache else
                                      f"built in {wall:.1f} s and cached") +
        f" ({info['updates']} pretraining updates, final loss {info['final_loss']:.4f})")
    return {"kind": "pretrained", "cache_key": key, "from_cache": from_cache, "updates": info["updates"],
            "final_loss": info["final_loss"], "wall_s": round(wall, 3), "build_wall_s": info["build_wall_s"]}


def _load_or_build(backend: Backend, manifest: Manifest, events: Events, stop: StopFlag, path: Path,
                   material: dict) -> tuple[dict, bool]:
    """Under the key's lock: load the base a concurrent trainer built meanwhile, or pretrain and
    cache it. Returns (build info, whether it came from the cache)."""
    key = path.stem
    lock = FileLock(path.with_suffix(".lock"), None, f"the base model {key}", label=manifest.run_id)
    t0 = time.monotonic()

    def waiting(holder: Holder) -> None:
        # The controller shows the wait as a phase of its own ("waiting for base, built by run X"):
        # without this event a waiting run looks like fine-tuning stuck at update 0.
        log(f"base model {key[:12]}: pid {holder.pid}" + (f" (run {holder.label})" if holder.label else "") +
            f" is building it; waiting for {path}")
        events.emit("wait", on="base_model", key=key, ended=False,
                    holder_pid=int(holder.pid) if holder.pid.isdigit() else None, holder_run=holder.label)

    lock.acquire(on_wait=waiting, stop=stop)
    if lock.waited:
        events.emit("wait", on="base_model", key=key, ended=True, waited_s=round(time.monotonic() - t0, 3))
    try:
        info = load_cached(path, key, backend.model)  # built while this trainer waited
        if info is not None:
            return info, True
        spec = manifest.pretrain
        assert spec is not None
        log(f"base model {key[:12]}: not cached; pretraining {spec['updates']} updates of "
            f"{spec['batch_size']} rows into {path}")
        info = pretrain(backend, manifest, events, stop)
        save_cached(path, key, material, backend.model, info)
        return info, False
    finally:
        lock.release()
