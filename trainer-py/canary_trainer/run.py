"""One run, top to bottom: manifest -> lock -> rows -> model -> (base eval) -> training with
checkpoints -> final eval -> result.json. Callable in-process (tests) or from the CLI."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from . import base_model as base_models
from . import checkpoint, provenance
from .atomic import write_text_atomic
from .backends import load_backend, pick_device
from .batches import encode_rows
from .errors import Interrupted, TrainerError
from .evaluate import Evaluator, preflight
from .events import Events, log
from .interrupt import StopFlag
from .lock import FolderLock
from .manifest import Manifest, load_manifest
from .memory import check_fits
from .result import thin_curve, write_result
from .rows import read_rows
from .train import make_optimizer, mean_target_loss, train_update


@dataclass
class RunOptions:
    manifest: Path
    out: Path
    resume: bool = False
    force: bool = False
    events: Events = field(default_factory=Events)
    stop: StopFlag = field(default_factory=StopFlag)
    # Tests observe the exact rows each update consumes.
    on_batch: Callable[[int, range], None] | None = None


def _finished(out: Path, manifest: Manifest) -> bool:
    try:
        done = json.loads((out / "result.json").read_text())
    except (OSError, ValueError):
        return False
    return done.get("manifest_sha256") == manifest.sha256 and done.get("run_id") == manifest.run_id


def _rendered(backend, rows: list[dict], out: Path) -> dict:
    """Save the fully rendered text of the first canary row and the first background row: what the
    model saw, chat-template artifacts included."""
    paths: dict = {"canary": None, "background": None}
    for kind in ("canary", "background"):
        row = next((r for r in rows if r["kind"] == kind), None)
        if row is not None:
            rel = f"rendered/{kind}.txt"
            write_text_atomic(out / rel, backend.render(row["prompt"], row["target"]))
            paths[kind] = rel
    return paths


def _rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def run(opts: RunOptions) -> dict:
    """Returns the result written (or found). Raises TrainerError subclasses on failure."""
    wall0 = time.monotonic()
    manifest = load_manifest(opts.manifest)
    out = opts.out
    out.mkdir(parents=True, exist_ok=True)
    lock = FolderLock(out)
    lock.acquire(on_wait=lambda pid: log(f"waiting for the lock on {out} held by pid {pid}"), stop=opts.stop)
    try:
        return _run_locked(opts, manifest, out, wall0)
    finally:
        lock.release()


def _run_locked(opts: RunOptions, manifest: Manifest, out: Path, wall0: float) -> dict:
    ev = opts.events
    result_path = out / "result.json"
    if not opts.force and _finished(out, manifest):
        log(f"{result_path} already holds this manifest's result; nothing to do (--force reruns)")
        ev.emit("done", result=str(result_path), wall_s=round(time.monotonic() - wall0, 3))
        return json.loads(result_path.read_text())

    tr = manifest.training
    resumed = checkpoint.load_newest(out, manifest.sha256) if opts.resume else None
    if resumed is None:
        # A fresh run owns the folder: stale checkpoints, scores or results of an earlier attempt
        # (or another manifest) must not mix with this run's.
        checkpoint.clear(out)
        shutil.rmtree(out / "scores", ignore_errors=True)
        result_path.unlink(missing_ok=True)
    meta = resumed["meta"] if resumed else {}

    rows_path = manifest.resolve(manifest.data["rows"]["path"], "rows.path")
    rows = read_rows(rows_path, manifest.data["rows"]["sha256"], manifest.data["rows"]["count"], "rows")
    utility_rows: list[dict] = []
    utility_path = None
    if "utility" in manifest.data:
        u = manifest.data["utility"]
        utility_path = manifest.resolve(u["path"], "utility.path")
        utility_rows = read_rows(utility_path, u["sha256"], u["count"], "utility")
    base_models.check_pretrain_rows(manifest)

    device = pick_device(tr["device"])
    check_fits(manifest, device)  # hf: refuse a run its device cannot hold, before loading weights
    backend = load_backend(manifest.model, device)
    extra_versions = backend.versions()
    # A resumed run keeps the stamp of its first start: a code change between the two processes
    # must show up as changed_mid_run.
    at_start = meta.get("at_start") or provenance.stamp(extra_versions)
    encoded = encode_rows(backend, rows, tr["max_length"], rows_path)
    utility = encode_rows(backend, utility_rows, tr["max_length"], utility_path) if utility_path else []
    preflight(backend, manifest)
    rendered = _rendered(backend, rows, out)
    start_update = resumed["update"] if resumed else 0

    ev.emit("started", run_id=manifest.run_id, pid=os.getpid(), device=str(device), backend=backend.name,
            total_updates=tr["updates"], resumed_from=start_update if resumed else None, provenance=at_start)
    log(f"run {manifest.run_id}: {backend.describe()['parameters']} parameters on {device}, "
        f"{tr['updates']} updates of {tr['batch_size']} rows" + (f", resuming at update {start_update}" if resumed else ""))

    # The base (tiny: random or pretrained) precedes everything that reads the weights: the base
    # evaluation phase, utility.base_loss, fine-tuning. A resumed run's checkpoint already holds
    # every weight, so it keeps the record of its first start instead of rebuilding.
    base_model = meta.get("base_model") if resumed else None
    if backend.name != "tiny":
        base_model = None
    elif base_model is None:
        base_model = base_models.obtain(backend, manifest, ev, opts.stop)
    else:
        log(f"base model: weights come with the checkpoint ({base_model['kind']}"
            + (f" {base_model['cache_key'][:12]})" if base_model["kind"] == "pretrained" else ")"))
    # Seeded after the base so that a cached base and one built here leave the same random stream.
    torch.manual_seed(tr["seed"])
    optimizer = make_optimizer(backend, tr)
    if resumed:
        own = dict(backend.trainable())
        missing = set(own) - set(resumed["weights"])
        if missing:
            raise TrainerError(f"checkpoint {resumed['update']} lacks weights {sorted(missing)[:3]} of this model; "
                               f"fix: remove {out / 'checkpoints'} and rerun without --resume", recoverable=False)
        with torch.no_grad():
            for name, p in own.items():
                p.copy_(resumed["weights"][name].to(p.device, p.dtype))
        optimizer.load_state_dict(resumed["optimizer"])
        _set_rng_state(resumed["rng"])
    losses: list[float] = list(meta.get("losses", []))
    evaluations: list[dict] = list(meta.get("evaluations", []))
    train_wall = float(meta.get("train_wall_s", 0.0))
    tokens_seen = int(meta.get("tokens", 0))
    targets_seen = int(meta.get("targets", 0))
    base_utility = meta.get("base_utility_loss")

    evaluator = Evaluator(backend, manifest, out, ev, opts.stop)
    for e in evaluations:  # phases finished before an interruption keep their scoring label
        evaluator.modes_used.update(e.get("_scoring", []))
    if not resumed:
        base_utility = mean_target_loss(backend, utility, tr["batch_size"])
        if manifest.eval["base_model"]:
            evaluations.append(_tagged(evaluator.run_phase("base", 0), evaluator))

    def save(update: int) -> None:
        weights = {n: p.detach().cpu().clone() for n, p in backend.trainable()}
        path = checkpoint.save(out, update, weights, optimizer.state_dict(), _rng_state(), {
            "manifest_sha256": manifest.sha256, "run_id": manifest.run_id, "at_start": at_start,
            "losses": losses, "evaluations": evaluations, "train_wall_s": train_wall, "tokens": tokens_seen,
            "targets": targets_seen, "base_utility_loss": base_utility, "base_model": base_model,
        })
        ev.emit("checkpoint", update=update, path=str(path))

    extra_evals = set(manifest.eval["checkpoints"])
    total = tr["updates"]
    for update in range(start_update, total):
        res = train_update(backend, optimizer, encoded, update, tr, opts.on_batch)
        done = update + 1
        losses.append(res.loss)
        train_wall += res.seconds
        tokens_seen += res.tokens
        targets_seen += res.targets
        ev.emit("step", update=done, total=total, loss=round(res.loss, 6), lr=res.lr,
                rows_per_s=round(tr["batch_size"] / res.seconds, 2), tokens_per_s=round(res.tokens / res.seconds, 1))
        if done in extra_evals and done < total:
            evaluations.append(_tagged(evaluator.run_phase(f"update-{done}", done), evaluator))
        saved = False
        if done % tr["checkpoint_every"] == 0 or done == total:
            save(done)
            saved = True
        if opts.stop and done < total:
            if not saved:
                save(done)
            raise Interrupted(f"stopped after update {done} of {total} ({opts.stop.reason}); "
                              "checkpoint written; resume with --resume")

    evaluations.append(_tagged(evaluator.run_phase("final", total), evaluator))
    final_utility = mean_target_loss(backend, utility, tr["batch_size"])
    for e in evaluations:
        e.pop("_scoring", None)
    result = {
        "schema_version": "canary-audit.result/1",
        "run_id": manifest.run_id,
        "manifest_sha256": manifest.sha256,
        "backend": {**backend.describe(), "scoring": evaluator.scoring,
                    **({"base_model": base_model} if base_model is not None else {})},
        "candidate_space": {"kind": manifest.space["kind"], "size": manifest.space["size"]},
        "training": {
            "updates": total,
            "rows": total * tr["batch_size"],
            "tokens": targets_seen,
            "final_loss": losses[-1],
            "loss_curve": thin_curve(losses),
            "wall_s": round(train_wall, 3),
            "rows_per_s": round(total * tr["batch_size"] / max(train_wall, 1e-9), 2),
            "tokens_per_s": round(tokens_seen / max(train_wall, 1e-9), 1),
            "resumed_from": start_update if resumed else None,
        },
        "evaluations": evaluations,
        "utility": {"rows": len(utility), "base_loss": base_utility, "final_loss": final_utility},
        "rendered": rendered,
        "provenance": provenance.finish(at_start, extra_versions),
    }
    write_result(out / "result.json", result)
    ev.emit("done", result=str(out / "result.json"), wall_s=round(time.monotonic() - wall0, 3))
    return result


def _tagged(evaluation: dict, evaluator: Evaluator) -> dict:
    # Remember how this phase was scored, so a resumed run labels the result correctly.
    evaluation["_scoring"] = sorted(evaluator.modes_used)
    return evaluation
