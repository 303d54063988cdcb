"""One run, top to bottom: manifest -> lock -> setup (rows, model) -> resume or start (base model,
optimizer, base evaluation) -> train (checkpoints, extra evaluations) -> evaluate (final phase)
-> write (result.json). Callable in-process (tests) or from the CLI."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from . import checkpoint, provenance, sampled_text, utility, weight_change
from .atomic import write_text_atomic
from .backends import load_backend, pick_device, reply_tokens
from .backends.base import Backend
from .backends.hf_load import tokenizers_read_once
from .base_eval import SharedBase
from .base_model import freeze_for_finetuning, frozen_in_finetuning, prepare_base
from .batches import encode_rows
from .bounded import read_text_bounded
from .errors import Interrupted, TrainerError
from .evaluate import Evaluator, preflight
from .events import Events, log
from .images import check_rows
from .interrupt import StopFlag
from .lock import FolderLock
from .manifest import Manifest, load_manifest
from .memory import check_fits
from .out_path import check_output_folder
from .placement import Placement, place
from .result import thin_curve, write_result
from .rows import check_lines, read_rows
from .run_state import PhaseRecord, RunState
from .tracking import Tracker, start_tracking, tracking_config
from .train import make_optimizer, mean_target_loss, train_updates


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


def run(opts: RunOptions) -> dict:
    """Returns the result written (or found). Raises TrainerError subclasses on failure."""
    wall0 = time.monotonic()
    manifest = load_manifest(opts.manifest)
    out = check_output_folder(opts.out, opts.manifest)
    out.mkdir(parents=True, exist_ok=True)
    # Several ranks (training.gpus): rank 0 holds the folder's lock and writes what is written once.
    placement = place(manifest.training, pick_device(manifest.training.device), out, manifest.sha256)
    lock = FolderLock(out) if placement.main else None
    try:
        if lock is not None:
            lock.acquire(on_wait=lambda h: log(f"waiting for the lock on {out} held by pid {h.pid}"), stop=opts.stop)
        return _run_locked(opts, manifest, wall0, placement)
    finally:
        if lock is not None:
            lock.release()
        placement.close()


def _run_locked(opts: RunOptions, manifest: Manifest, wall0: float, placement: Placement) -> dict:
    result_path = opts.out / "result.json"
    if not opts.force and _finished(opts.out, manifest):
        log(f"{result_path} already holds this manifest's result; nothing to do (--force reruns)")
        result = json.loads(read_text_bounded(result_path))
    else:
        # Curves and phases go to TensorBoard / W&B from rank 0, beside the progress events.
        tracker = start_tracking(tracking_config(manifest), manifest, opts.out) if placement.main else Tracker()
        observer = opts.events.observer
        opts.events.observer = tracker.observe if observer is None else _both(observer, tracker.observe)
        try:
            steps = _Run(opts, manifest, placement, tracker)
            steps.resume_or_start()
            steps.train()
            steps.evaluate()
            result = steps.write()
        finally:
            opts.events.observer = observer
            tracker.close()
    opts.events.emit("done", result=str(result_path), wall_s=round(time.monotonic() - wall0, 3))
    return result


def _both(first: Callable[[dict], None], second: Callable[[dict], None]) -> Callable[[dict], None]:
    def observe(event: dict) -> None:
        first(event)
        second(event)
    return observe


def _finished(out: Path, manifest: Manifest) -> bool:
    try:
        done = json.loads(read_text_bounded(out / "result.json"))
    except (OSError, ValueError):
        return False
    return done.get("manifest_sha256") == manifest.sha256 and done.get("run_id") == manifest.run_id


@dataclass
class _Inputs:
    rows: list[dict]
    rows_path: Path
    utility_rows: list[dict]
    utility_path: Path | None


def _read_inputs(manifest: Manifest) -> _Inputs:
    """Every data file the manifest names, checked against its sha256 and count before any work.
    The base's pretraining rows are only checked here: a cached base does not read them."""
    ref = manifest.data["rows"]
    rows_path = manifest.resolve(ref["path"], "rows.path")
    rows = read_rows(rows_path, ref["sha256"], ref["count"], "rows")
    check_rows(rows, rows_path, manifest.image_sizes)
    utility_rows: list[dict] = []
    utility_path = None
    if "utility" in manifest.data:
        u = manifest.data["utility"]
        utility_path = manifest.resolve(u["path"], "utility.path")
        utility_rows = read_rows(utility_path, u["sha256"], u["count"], "utility")
        check_rows(utility_rows, utility_path, manifest.image_sizes)
    if manifest.pretrain is not None:
        pre = manifest.pretrain["rows"]
        check_lines(manifest.resolve(pre["path"], "model.tiny.pretrain.rows.path"), pre["sha256"], pre["count"],
                    "model.tiny.pretrain.rows")
    return _Inputs(rows, rows_path, utility_rows, utility_path)


def _load(manifest: Manifest, device: torch.device) -> Backend:
    """The manifest's backend; one that reads images reads them from the run folder."""
    backend = load_backend(manifest.model, device)
    backend.attach_images(manifest.folder)
    return backend


def _rendered(backend: Backend, rows: list[dict], out: Path) -> dict:
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


class _Run:
    """The steps of one run in the order they happen. Setup is the constructor: it reads the
    newest checkpoint (when resuming) and the rows, loads the model and announces the start."""

    optimizer: torch.optim.Optimizer

    def __init__(self, opts: RunOptions, manifest: Manifest, placement: Placement, tracker: Tracker):
        self.opts, self.manifest, self.out, self.ev = opts, manifest, opts.out, opts.events
        self.tracker = tracker
        self.tr = manifest.training
        self.placement = placement
        # Checkpoints that failed their content hashes (or did not load) at this start, and over the
        # whole run (carried in each later checkpoint): the started event and result.json say so.
        opened = placement.open(opts.resume, self._clear)
        self.saved, self.skipped_now, self.checkpoints_skipped = opened.saved, opened.skipped_now, opened.skipped
        inputs = _read_inputs(manifest)
        self.device = placement.device
        with tokenizers_read_once():
            # hf: refuse a run its device cannot hold, before loading weights
            check_fits(manifest, self.device, lambda: reply_tokens(manifest.model, inputs.rows))
            # A sharded run evaluates on rank 0, on an unsharded copy the trained weights are gathered into.
            self.backend, self.scorer = placement.models(lambda: _load(manifest, self.device))
        self.versions = self.backend.versions()
        # A resumed run keeps the stamp of its first start: a code change between the two processes
        # must show up as changed_mid_run.
        self.state = RunState.from_meta(self.saved.meta) if self.saved else \
            RunState(at_start=provenance.stamp(self.versions))
        self.inputs = inputs
        self.main = placement.main
        # sampled-text: the secrets come from the base, so the rows are read (and checked) once the
        # base is in place (resume_or_start); result.json's `sampled_text` then. Otherwise the
        # training rows are checked first, before the utility rows (a too-long row names rows.jsonl).
        self.sampled: dict | None = None
        if manifest.sampled_text is None:
            self._rows_ready()
        self.utility = encode_rows(self.backend, inputs.utility_rows, self.tr.max_length, inputs.utility_path) \
            if inputs.utility_path else []
        self.utility_rows = inputs.utility_rows
        # Generation limit of the utility rows when utility.metrics asks for replies (None: loss only).
        self.utility_gen = manifest.utility_generation
        self.start_update = self.saved.update if self.saved else 0
        self.evaluator = Evaluator(self.scorer, manifest, self.out, self.ev, opts.stop) if self.main else None
        self.final_utility: float | None = None
        self.final_utility_texts: list[str] | None = None
        self.weights_start: weight_change.WeightStart | None = None
        self._announce()

    def _rows_ready(self) -> None:
        """Encode the training rows, check the probes fit the context, save the rendered examples."""
        inputs, manifest = self.inputs, self.manifest
        self.encoded = encode_rows(self.backend, inputs.rows, self.tr.max_length, inputs.rows_path)
        preflight(self.backend, manifest)
        self.rendered = _rendered(self.backend, inputs.rows, self.out) if self.main else {}

    def _clear(self) -> None:
        # A fresh run owns the folder: stale checkpoints, scores or results of an earlier attempt
        # (or another manifest) must not mix with this run's.
        checkpoint.clear(self.out)
        shutil.rmtree(self.out / "scores", ignore_errors=True)
        shutil.rmtree(self.out / "utility", ignore_errors=True)
        (self.out / "result.json").unlink(missing_ok=True)
        (self.out / sampled_text.FILE).unlink(missing_ok=True)

    def _announce(self) -> None:
        tr, resumed = self.tr, self.saved is not None
        self.ev.emit("started", run_id=self.manifest.run_id, pid=os.getpid(), device=str(self.device),
                     backend=self.backend.name, total_updates=tr.updates,
                     resumed_from=self.start_update if resumed else None, provenance=self.state.at_start,
                     **({"checkpoints_skipped": self.skipped_now} if self.skipped_now else {}))
        log(f"run {self.manifest.run_id}: {self.backend.describe()['parameters']} parameters on {self.device}, "
            f"{tr.updates} updates of {tr.batch_size} rows"
            + (f", resuming at update {self.start_update}" if resumed else ""))

    def resume_or_start(self) -> None:
        """The base weights, the training seed and the optimizer; then the checkpoint's weights,
        optimizer and RNG, or (a fresh run) the base's utility loss and evaluation phase."""
        self._base()
        if self.manifest.sampled_text is not None:
            # Before any training step and before the training seed: the sampling has its own
            # generators, so the training stream is the same with and without the design.
            self.sampled = sampled_text.prepare(self.backend, self.manifest, self.out, self.inputs.rows,
                                                self.saved is not None, self.state.base_model)
            self._rows_ready()
        freeze_for_finetuning(self.backend, self.manifest)
        # Seeded after the base so that a cached base and one built here leave the same random stream.
        torch.manual_seed(self.tr.seed)
        self.optimizer = make_optimizer(self.backend, self.tr)
        if self.saved is not None:
            self.placement.restore(self.saved, self.backend, self.optimizer)
            # phases finished before an interruption keep their scoring label
            if self.evaluator is not None:
                self.evaluator.modes_used.update(self.state.scoring_modes())
            if self.utility_gen is not None and self.state.base_utility_texts is None:
                raise TrainerError(f"checkpoint {self.saved.update} lacks the base model's utility replies this manifest asks "
                                   f"for; fix: remove {self.out / 'checkpoints'} so the next attempt starts from scratch",
                                   recoverable=False)
            return
        self.placement.gather(self.backend, self.scorer)
        if self.main:
            self.state.base_utility_loss = mean_target_loss(self.scorer, self.utility, self.tr.batch_size)
        if self.utility_gen is not None and self.evaluator is not None:
            self.state.base_utility_texts = utility.base_texts(self.scorer, self.manifest, self.opts.stop,
                                                               self.utility_rows, self.utility_gen,
                                                               self.state.base_model)
        if self.manifest.eval["base_model"]:
            self._evaluate("base", 0, self.state.base_model)

    def _base(self) -> None:
        # The base precedes everything that reads the weights: the base evaluation phase,
        # utility.base_loss, fine-tuning. A resumed run's checkpoint already holds every trained
        # weight, so it keeps the record of its first start instead of rebuilding; the weights
        # fine-tuning leaves frozen (model.tiny.vision.freeze) are not in it and come from the base
        # again (the cache, or the same build).
        base = self.state.base_model
        if self.saved is None:
            self.state.base_model = prepare_base(self.backend, self.manifest, self.ev, self.opts.stop)
        elif frozen_in_finetuning(self.manifest):
            prepare_base(self.backend, self.manifest, self.ev, self.opts.stop)
        elif base is not None:
            log(f"base model: weights come with the checkpoint ({base['kind']}"
                + (f" {base['cache_key'][:12]})" if "cache_key" in base else ")"))

    def train(self) -> None:
        """The remaining updates; extra evaluation phases and checkpoints between them. A stop
        writes a checkpoint (unless one was just written) and raises Interrupted."""
        total, every = self.tr.updates, self.tr.checkpoint_every
        extra_evals = set(self.manifest.eval["checkpoints"])

        def after_update(done: int) -> None:
            if done in extra_evals and done < total:
                self._evaluate(f"update-{done}", done)
            if done % every == 0 or done == total:
                self._save(done)

        def stopped(done: int) -> Interrupted:
            if done % every:
                self._save(done)
            return Interrupted(f"stopped after update {done} of {total} ({self.opts.stop.reason}); "
                               "checkpoint written; the run's next attempt continues from it")

        # Sharded weights, and a run resumed after its last update, are not compared (no weight_change).
        self.weights_start = weight_change.start(self.backend.trainable(), self.start_update) \
            if self.placement.whole_weights and self.start_update < total else None
        train_updates(self.backend, self.optimizer, self.encoded, self.tr, self.state.totals, self.ev, self.opts.stop,
                      stopped, start=self.start_update, after_update=after_update, on_batch=self.opts.on_batch,
                      update_fn=self.placement.update, agree=self.placement.agree)

    def evaluate(self) -> None:
        self._evaluate("final", self.tr.updates)
        if not self.main:
            return
        self.final_utility = mean_target_loss(self.scorer, self.utility, self.tr.batch_size)
        if self.utility_gen is not None:
            self.final_utility_texts = utility.decode_rows(self.scorer, self.utility_rows, self.utility_gen,
                                                           self.opts.stop)

    def write(self) -> dict:
        if not self.main:
            return {}
        assert self.evaluator is not None  # rank 0 always has one
        st, tr, total = self.state, self.tr, self.tr.updates
        t = st.totals
        result = {
            "schema_version": "canary-audit.result/1",
            "run_id": self.manifest.run_id,
            "manifest_sha256": self.manifest.sha256,
            "backend": {**self.scorer.describe(), "scoring": self.evaluator.scoring,
                        **({"base_model": st.base_model} if st.base_model is not None else {})},
            "candidate_space": {"kind": self.manifest.space["kind"], "size": self.manifest.space["size"]},
            "training": {
                "updates": total,
                "rows": total * tr.batch_size,
                "tokens": t.targets,
                "final_loss": t.losses[-1],
                "loss_curve": thin_curve(t.losses),
                "wall_s": round(t.wall_s, 3),
                "rows_per_s": round(total * tr.batch_size / max(t.wall_s, 1e-9), 2),
                "tokens_per_s": round(t.tokens / max(t.wall_s, 1e-9), 1),
                "resumed_from": self.start_update if self.saved else None,
                "checkpoints_skipped": self.checkpoints_skipped,
            },
            "evaluations": [r.entry for r in st.evaluations],
            "utility": {"rows": len(self.utility), "base_loss": st.base_utility_loss, "final_loss": self.final_utility,
                        **self._utility_outputs()},
            "rendered": self.rendered,
            "provenance": provenance.finish(st.at_start, self.versions),
            "numerics": provenance.numerics(str(self.device), self.backend.dtype_name),
            **({"weight_change": self.weights_start.record(self.backend.trainable())} if self.weights_start else {}),
            **({"sampled_text": self.sampled} if self.sampled is not None else {}),
        }
        write_result(self.out / "result.json", result)
        return result

    def _utility_outputs(self) -> dict:
        """Write utility/base.jsonl and utility/final.jsonl (when the manifest asks for replies) and
        return result.json's base_outputs / final_outputs; nothing for a loss-only manifest."""
        if self.utility_gen is None:
            return {}
        rows, base, final = self.utility_rows, self.state.base_utility_texts, self.final_utility_texts
        return {"base_outputs": utility.write_outputs(self.out, utility.BASE_FILE, rows, base) if base is not None else None,
                "final_outputs": utility.write_outputs(self.out, utility.FINAL_FILE, rows, final) if final is not None else None}

    def _evaluate(self, phase: str, update: int, base_record: dict | None = None) -> None:
        self.placement.gather(self.backend, self.scorer)
        if self.evaluator is not None:
            # The base phase through the audit's shared cache, around the same evaluator.
            through = SharedBase(self.evaluator, base_record) if phase == "base" else self.evaluator
            entry = through.run_phase(phase, update)
            self.tracker.phase(self.manifest, self.out, entry)
            # Remember how every phase so far was scored, so a resumed run labels the result correctly.
            self.state.evaluations.append(PhaseRecord(entry, sorted(self.evaluator.modes_used)))
        self.placement.barrier()

    def _save(self, update: int) -> None:
        path = self.placement.save(update, self.backend, self.optimizer, self.state.to_meta(self.manifest))
        self.ev.emit("checkpoint", update=update, path=str(path))
