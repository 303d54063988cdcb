"""Experiment tracking: a run's training curves and evaluation phases, for TensorBoard (always, when
tensorboardX is installed) and Weights & Biases (when the audit or the worker asks for it).

The tracker watches the progress events the run emits anyway (events.Events' observer) and the
evaluation phases as they finish; it never changes what is trained or scored.
  <out>/tensorboard/events.out.tfevents.*   one file per attempt (a resumed run adds one)
  <out>/wandb/                              W&B's run folder (offline-run-* under WANDB_MODE=offline)
W&B: one W&B run per training run (id = run id, so a resumed attempt continues it), grouped by
audit (group = audit id), named by its grid cell, with the cell as config.

Where the W&B project comes from, first found wins:
  CANARY_TRAINER_WANDB_PROJECT   the worker's --wandb PROJECT (empty: W&B off)
  <audit>/tracking.json          {"wandb": {"project": P, "entity": E}}, written by plan/submit/run
                                 from the grid's `tracking:` block or their --wandb flag
CANARY_TRAINER_TENSORBOARD=0 turns the event files off (host.py parses these variables). W&B's own variables (WANDB_MODE, WANDB_API_KEY,
WANDB_DIR...) pass through: WANDB_MODE=offline needs no network.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from .errors import TrainerError
from .events import log
from .host import host

if TYPE_CHECKING:  # the verdicts' tracker (track_verdicts.py) runs without the manifest's imports
    from .manifest import Manifest

TENSORBOARD_DIR = "tensorboard"
TRACKING_FILE = "tracking.json"
WANDB_PROJECT_ENV = "CANARY_TRAINER_WANDB_PROJECT"


@dataclass(frozen=True)
class TrackingConfig:
    """What to track into. `wandb_project` None: no W&B."""

    tensorboard: bool = True
    wandb_project: str | None = None
    wandb_entity: str | None = None
    # Where the W&B setting came from, for error messages.
    wandb_source: str = ""


def tracking_config(manifest: Manifest, env: Mapping[str, str] | None = None) -> TrackingConfig:
    """The run's tracking settings: the worker's environment, then the audit's tracking.json (the run
    folder is <audit>/runs/<run_id>/; a manifest elsewhere has no audit file)."""
    return tracking_config_of_audit(manifest.folder.parent.parent, env)


def tracking_config_of_audit(audit_dir: Path, env: Mapping[str, str] | None = None) -> TrackingConfig:
    """The worker's environment, then <audit_dir>/tracking.json."""
    h = host(env)
    tensorboard = h.tensorboard
    if h.wandb_project is not None:
        return TrackingConfig(tensorboard, h.wandb_project or None, h.wandb_entity, WANDB_PROJECT_ENV)
    path = audit_dir / TRACKING_FILE
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return TrackingConfig(tensorboard)
    except OSError as exc:
        raise TrainerError(f"cannot read {path}: {exc}; fix: make it readable, or plan the audit again to rewrite it",
                           kind="bad_manifest", recoverable=False) from exc
    try:
        data = json.loads(raw)
        wandb = data.get("wandb") if isinstance(data, dict) else None
        project = wandb.get("project") if isinstance(wandb, dict) else None
        entity = wandb.get("entity") if isinstance(wandb, dict) else None
        if wandb is not None and (not isinstance(project, str) or not project.strip()):
            raise ValueError("wandb.project must be a non-empty string")
        if entity is not None and not isinstance(entity, str):
            raise ValueError("wandb.entity must be a string")
    except ValueError as exc:
        raise TrainerError(f"{path}: {exc}; fix: set tracking.wandb.project in the grid and plan the audit again",
                           kind="bad_manifest", recoverable=False) from exc
    return TrackingConfig(tensorboard, project, entity, str(path))


class Sink(Protocol):
    def scalars(self, values: dict[str, float], step_metric: str, step: int) -> None: ...

    def close(self) -> None: ...


class TensorBoardSink:
    """Event files through tensorboardX: each scalar under its tag, at the update it belongs to."""

    def __init__(self, folder: Path, config: dict[str, Any]):
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(logdir=str(folder), flush_secs=30)
        self.writer.add_text("run/config", "```\n" + json.dumps(config, indent=2, sort_keys=True) + "\n```", 0)

    def scalars(self, values: dict[str, float], step_metric: str, step: int) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, step)

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """One W&B run per training run. Pretraining, fine-tuning and evaluation count their own
    updates (pretrain/update, train/update, eval/update), so each curve has its own x axis."""

    def __init__(self, cfg: TrackingConfig, out: Path, manifest: Manifest, config: dict[str, Any]):
        import wandb

        audit = manifest.data["audit"]
        self.run = wandb.init(project=cfg.wandb_project, entity=cfg.wandb_entity, group=audit["id"],
                              name=audit["cell_id"], id=manifest.run_id, resume="allow", job_type="fine-tune",
                              config=config, dir=str(out))
        for prefix in ("pretrain", "train", "eval"):
            self.run.define_metric(f"{prefix}/update")
            self.run.define_metric(f"{prefix}/*", step_metric=f"{prefix}/update")

    def scalars(self, values: dict[str, float], step_metric: str, step: int) -> None:
        self.run.log({**values, step_metric: step})

    def close(self) -> None:
        self.run.finish()


@dataclass
class Tracker:
    """Sends a run's curves to its sinks. A tracker with no sinks does nothing."""

    sinks: list[Sink] = field(default_factory=list)

    def observe(self, event: dict) -> None:
        """events.Events' observer: step events become curves."""
        if event.get("event") != "step":
            return
        prefix = "pretrain" if event.get("phase") == "pretrain" else "train"
        values = {f"{prefix}/{k}": float(event[k]) for k in ("loss", "lr", "rows_per_s", "tokens_per_s")
                  if isinstance(event.get(k), (int, float))}
        self._send(values, f"{prefix}/update", int(event["update"]))

    def phase(self, manifest: Manifest, out: Path, entry: dict) -> None:
        """An evaluation phase (base, update-N, final) as per-arm, per-probe-kind scalars at its update."""
        self._send(phase_scalars(manifest, out, entry), "eval/update", int(entry["update"]))

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
        self.sinks = []

    def _send(self, values: dict[str, float], step_metric: str, step: int) -> None:
        for sink in self.sinks:
            sink.scalars(values, step_metric, step)


def phase_scalars(manifest: Manifest, out: Path, entry: dict) -> dict[str, float]:
    """Median exposure (bits; ceiling log2 |C|) and greedy exact recovery of the phase's probes, by
    arm (inserted, held_out) and probe kind. A live view only: the report computes the audit's figures
    from the same score files (rank: 1 + candidates other than the true code scoring at least as high)."""
    import numpy as np

    codes = {c["id"]: c["code"] for c in manifest.data["canaries"]}
    codes.update({c["id"]: c["code"] for c in manifest.data.get("held_out", [])})
    exposures: dict[str, list[float]] = {}
    recovered: dict[str, list[float]] = {}
    for probe in entry["probes"]:
        key = f"eval/{probe['arm']}/{probe['kind']}"
        code = codes[probe["canary_id"]]
        scores = np.fromfile(out / probe["scores_file"], dtype="<f4")
        true = scores[manifest.candidates(probe["canary_id"]).index(code)]
        rank = int(np.count_nonzero(scores >= true))  # the true code counts itself once: 1 + others
        exposures.setdefault(key, []).append(math.log2(len(scores)) - math.log2(max(rank, 1)))
        greedy = probe["greedy"].get("prefill") or probe["greedy"].get("free")
        if greedy is not None:
            recovered.setdefault(key, []).append(1.0 if greedy["code"] == code else 0.0)
    values = {f"{k}/exposure_median": float(np.median(v)) for k, v in exposures.items()}
    values.update({f"{k}/recovered": float(np.mean(v)) for k, v in recovered.items()})
    return values


def start_tracking(cfg: TrackingConfig, manifest: Manifest, out: Path,
                   importer: Callable[[str], Any] | None = None) -> Tracker:
    """The run's tracker. TensorBoard is best effort (a missing tensorboardX: one warning, no event
    files); W&B was asked for, so a missing wandb is an error that says how to install it."""
    importer = importer or _import
    config = run_config(manifest)
    sinks: list[Sink] = []
    if cfg.wandb_project is not None:
        try:
            importer("wandb")
        except ImportError as exc:
            raise TrainerError(f"W&B tracking is asked for (project {cfg.wandb_project!r}, from {cfg.wandb_source}) but "
                               f"wandb cannot be imported ({exc}); fix: pip install wandb into the trainer's Python "
                               "(trainer-py/.venv), or remove tracking.wandb from the grid / --wandb from the command",
                               kind="missing_dependency", recoverable=False) from exc
    if cfg.tensorboard:
        try:
            importer("tensorboardX")
            sinks.append(TensorBoardSink(out / TENSORBOARD_DIR, config))
        except ImportError as exc:
            log(f"tracking: no TensorBoard event files for this run: tensorboardX cannot be imported ({exc}); fix: "
                "bash .ci/setup (or pip install -r trainer-py/requirements.lock); CANARY_TRAINER_TENSORBOARD=0 "
                "silences this")
    if cfg.wandb_project is not None:
        sinks.append(WandbSink(cfg, out, manifest, config))
    return Tracker(sinks)


def run_config(manifest: Manifest) -> dict[str, Any]:
    """The grid cell and the settings a reader compares runs by."""
    audit, tr = manifest.data["audit"], manifest.data["training"]
    return {"run_id": manifest.run_id, "audit_id": audit["id"], "audit_name": audit["name"],
            "cell_id": audit["cell_id"], "cell": audit["cell"], "model": manifest.data["model"],
            "training": tr, "manifest_sha256": manifest.sha256}


def _import(name: str) -> Any:
    return __import__(name)
