"""The audit's verdicts, from the report's summary.json, to TensorBoard (and W&B when the audit asks):
`python -m canary_trainer.track_verdicts --summary <audit>/report/summary.json --audit <audit>`.

`canary-audit run` and `report` call it after writing the report. TensorBoard: <audit>/tensorboard/verdicts/,
beside which `tensorboard --logdir <audit>` also finds every run's curves (runs/*/output/tensorboard). Per
comparison i (summary.json's verdicts[i]): `verdict/i/estimate_bits`, `lo_bits`, `hi_bits` and `decision`
(+1 higher, -1 lower, 0 equivalent; undecided: no point) at step = the runs it rests on, so sequential
looks draw a line; and one text table of every comparison, its adjusted verdict and its sentence. W&B: one
run per audit (`id` <audit_id>-verdicts, job_type report, in the audit's group) with the same table.
Prints one JSON line on stdout: {"tensorboard": folder or null, "wandb": bool, "warnings": [...]}.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .errors import TrainerError
from .tracking import TENSORBOARD_DIR, tracking_config_of_audit

DECISION = {"higher": 1.0, "lower": -1.0, "equivalent": 0.0}


def verdict_rows(summary: dict) -> list[dict[str, Any]]:
    """One row per declared comparison: what the report decided, in plain fields."""
    rows = []
    for i, v in enumerate(summary.get("verdicts") or []):
        adjusted = v.get("adjusted") or v.get("unadjusted") or {}
        rows.append({"index": i, "comparison": v.get("comparison", f"comparison {i}"),
                     "verdict": adjusted.get("verdict", "undecided"), "estimate_bits": v.get("estimate"),
                     "lo_bits": v.get("lo"), "hi_bits": v.get("hi"), "n_runs": v.get("n_runs"),
                     "n_canaries": v.get("n_canaries"), "sentence": v.get("sentence", "")})
    return rows


def write_tensorboard(rows: list[dict[str, Any]], folder: Path) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(logdir=str(folder), flush_secs=30)
    try:
        for r in rows:
            step = int(r["n_runs"] or 0)
            for key in ("estimate_bits", "lo_bits", "hi_bits"):
                if isinstance(r[key], (int, float)):
                    writer.add_scalar(f"verdict/{r['index']}/{key}", float(r[key]), step)
            if r["verdict"] in DECISION:
                writer.add_scalar(f"verdict/{r['index']}/decision", DECISION[r["verdict"]], step)
        table = ["| # | comparison | verdict | sentence |", "| --- | --- | --- | --- |"]
        table += [f"| {r['index']} | {_cell(r['comparison'])} | {r['verdict']} | {_cell(r['sentence'])} |" for r in rows]
        writer.add_text("verdicts", "\n".join(table), max((int(r["n_runs"] or 0) for r in rows), default=0))
    finally:
        writer.close()


def write_wandb(rows: list[dict[str, Any]], audit: dict, project: str, entity: str | None, folder: Path) -> None:
    import wandb

    folder.mkdir(parents=True, exist_ok=True)
    run = wandb.init(project=project, entity=entity, group=audit["id"], name=f"{audit['name']} verdicts",
                     id=f"{audit['id']}-verdicts", resume="allow", job_type="report", dir=str(folder),
                     config={"audit_id": audit["id"], "audit_name": audit["name"]})
    try:
        columns = ["index", "comparison", "verdict", "estimate_bits", "lo_bits", "hi_bits", "n_runs", "n_canaries",
                   "sentence"]
        run.log({"verdicts": wandb.Table(columns=columns, data=[[r[c] for c in columns] for r in rows])})
        for r in rows:
            run.summary[f"verdict/{r['index']}"] = r["verdict"]
    finally:
        run.finish()


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def track(summary_path: Path, audit_dir: Path) -> dict[str, Any]:
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    rows = verdict_rows(summary)
    out: dict[str, Any] = {"tensorboard": None, "wandb": False, "warnings": []}
    if not rows:
        return out
    cfg = tracking_config_of_audit(audit_dir)
    if cfg.tensorboard:
        try:
            folder = audit_dir / TENSORBOARD_DIR / "verdicts"
            write_tensorboard(rows, folder)
            out["tensorboard"] = str(folder)
        except ImportError as exc:
            out["warnings"].append(f"no TensorBoard file of the verdicts: tensorboardX cannot be imported ({exc}); "
                                   "fix: bash .ci/setup (or pip install -r trainer-py/requirements.lock)")
    if cfg.wandb_project is not None:
        audit = summary.get("audit") or {}
        try:
            write_wandb(rows, {"id": audit.get("id", audit_dir.name), "name": audit.get("name", audit_dir.name)},
                        cfg.wandb_project, cfg.wandb_entity, audit_dir / "report-wandb")
            out["wandb"] = True
        except ImportError as exc:
            out["warnings"].append(f"verdicts not sent to W&B project {cfg.wandb_project!r}: wandb cannot be imported "
                                   f"({exc}); fix: pip install wandb into the trainer's Python")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m canary_trainer.track_verdicts", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--summary", required=True, type=Path, help="the report's summary.json")
    p.add_argument("--audit", required=True, type=Path, help="the audit folder (holds tracking.json, if any)")
    args = p.parse_args(argv)
    # tensorboardX imports torch when it can, seconds of start-up this process never uses.
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
    try:
        result = track(args.summary, args.audit)
    except TrainerError as exc:
        print(f"cannot track the verdicts: {exc.message}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"cannot track the verdicts of {args.summary}: {exc}; fix: write the report again "
              "(canary-audit report AUDIT)", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
