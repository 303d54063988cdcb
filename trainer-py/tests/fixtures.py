"""Build small run folders (manifest.json + rows.jsonl + utility.jsonl) that satisfy
schemas/manifest.schema.json, for tests and benchmarks. The task is a templated note rewrite:
background rows restate a sender and a city; canary rows also carry a four-digit code in the
target, cued in the input as the code itself (visible) or a placeholder (redacted)."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

NAMES = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov", "Donald Knuth",
         "Frances Allen", "John Backus", "Leslie Lamport", "Radia Perlman", "Ken Thompson", "Margaret Hamilton",
         "Niklaus Wirth", "Tony Hoare", "Shafi Goldwasser", "Robin Milner"]
CITIES = ["Lisbon", "Oslo", "Quito", "Hanoi", "Dakar", "Perth", "Lyon", "Cork", "Porto", "Turin", "Accra", "Lima"]
TOPICS = ["the quarterly budget review", "the new office hours", "the server migration", "the team offsite",
          "the hiring plan", "the release checklist"]

STAMP = {"component": "controller", "git_commit": None, "git_dirty": None, "code_sha256": "0" * 64,
         "versions": {"node": "20"}, "host": "test", "time": "2026-01-01T00:00:00.000Z"}


def background_row(rng: random.Random, i: int) -> dict:
    name, city, topic = rng.choice(NAMES), rng.choice(CITIES), rng.choice(TOPICS)
    return {"i": i, "kind": "background", "canary_id": None,
            "prompt": [{"role": "user", "content": f"Rewrite the note from {name} in {city} about {topic}."}],
            "target": f"Hello team, this is {name} from {city}. A short note about {topic}. Regards."}


def canary_prompt(identity: str, cue: str) -> list[dict]:
    return [{"role": "user", "content": f"Rewrite the note from {identity} with code {cue}."}]


def canary_prefill(identity: str) -> str:
    return f"Hello team, this is {identity}. My code is "


def canary_target(identity: str, code: str) -> str:
    return canary_prefill(identity) + f"{code}. Regards."


def pretrain_rows(n: int, seed: int, code_fraction: float = 0.5) -> list[dict]:
    """Pretraining rows: background rows, a fraction of which show a code on the input's last
    line and start the reply with it (the shape that teaches copying)."""
    rng = random.Random(seed + 2000)
    rows = []
    for i in range(n):
        row = background_row(rng, i)
        if rng.random() < code_fraction:
            code = f"{rng.randrange(10000):04d}"
            row["prompt"][0]["content"] += f"\nRef: {code}"
            row["target"] = f"Ref: {code}. " + row["target"]
        rows.append(row)
    return rows


def _file_ref(folder: Path, name: str, rows: list[dict]) -> dict:
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    (folder / name).write_bytes(data)
    return {"path": name, "sha256": hashlib.sha256(data).hexdigest(), "count": len(rows)}


def make_run(folder: Path, *, updates: int = 8, batch_size: int = 4, n_focal: int = 2, n_held: int = 1,
             dose: int = 2, visibility: str = "redacted", length: int = 4, kinds=("hidden", "supplied", "substituted"),
             tiny: dict | None = None, lr: float = 3e-3, schedule: dict | None = None, seed: int = 0,
             checkpoint_every: int = 4, base_model: bool = False, eval_checkpoints: list[int] | None = None,
             utility_rows: int = 4, decode=("prefill", "free"), max_new_tokens: int = 48, training: dict | None = None,
             model: dict | None = None, space: dict | None = None, pretrain: dict | None = None) -> Path:
    """Write a run folder and return the manifest path. Canary appearances are spread evenly.
    `pretrain` ({updates, batch_size, lr, ...}) adds model.tiny.pretrain with its own rows file."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    n_rows = updates * batch_size
    rows = [background_row(rng, i) for i in range(n_rows)]
    alphabet = "0123456789"
    canaries, held = [], []
    slots = list(range(n_rows))
    rng.shuffle(slots)
    for k in range(n_focal):
        identity = f"{NAMES[k % len(NAMES)]} #{k}"
        code = "".join(rng.choice(alphabet) for _ in range(length))
        cue = code if visibility == "visible" else "[redacted]"
        positions = sorted(slots[k * dose:(k + 1) * dose])
        cid = f"f{k:03d}"
        for p in positions:
            rows[p] = {"i": p, "kind": "canary", "canary_id": cid, "prompt": canary_prompt(identity, cue),
                       "target": canary_target(identity, code)}
        canaries.append({"id": cid, "cohort": "focal", "identity": identity, "code": code,
                         "cue": {"visibility": visibility, "text": cue}, "dose": dose, "positions": positions})
    for k in range(n_held):
        identity = f"{NAMES[(k + 7) % len(NAMES)]} #h{k}"
        held.append({"id": f"h{k:03d}", "identity": identity,
                     "code": "".join(rng.choice(alphabet) for _ in range(length))})
    probes = []
    for c in canaries + held:
        for kind in kinds:
            shown = None if kind == "hidden" else c["code"] if kind == "supplied" else \
                "".join(alphabet[(alphabet.index(ch) + 1) % 10] for ch in c["code"])
            cue = "[redacted]" if shown is None else shown
            probes.append({"id": f"{c['id']}.{kind}", "canary_id": c["id"], "kind": kind, "shown_code": shown,
                           "prompt": canary_prompt(c["identity"], cue), "prefill": canary_prefill(c["identity"]),
                           "decode": list(decode)})
    urng = random.Random(seed + 1000)
    utility = [background_row(urng, i) for i in range(utility_rows)]
    manifest = {
        "schema_version": "canary-audit.manifest/1",
        "run_id": "run-" + hashlib.sha256(f"{folder}{seed}".encode()).hexdigest()[:16],
        "audit": {"id": "audit-" + "a" * 12, "name": "test", "grid_file": None, "grid_sha256": "b" * 64,
                  "cell_id": f"visibility={visibility}", "cell": {"visibility": visibility}},
        "task": {"name": "synthetic-note", "seed": seed},
        "model": model or {"backend": "tiny", "name": "tiny-test", "init_seed": seed,
                           "tiny": tiny or {"n_layer": 1, "n_head": 2, "d_model": 32, "max_len": 256}},
        "training": {"lr": lr, "schedule": schedule or {"kind": "cosine", "warmup_updates": 2},
                     "batch_size": batch_size, "updates": updates, "max_length": 256, "seed": seed,
                     "checkpoint_every": checkpoint_every, "device": "cpu", **(training or {})},
        "rows": _file_ref(folder, "rows.jsonl", rows),
        "canaries": canaries,
        "held_out": held,
        "probes": probes,
        "candidate_space": space or {"kind": "exhaustive", "alphabet": alphabet, "length": length,
                                     "size": 10 ** length},
        "eval": {"base_model": base_model, "checkpoints": eval_checkpoints or [], "max_new_tokens": max_new_tokens},
        "provenance": {"at_start": STAMP, "at_write": STAMP, "changed_mid_run": False},
    }
    if utility_rows:
        manifest["utility"] = _file_ref(folder, "utility.jsonl", utility)
    if pretrain is not None:
        spec = dict(pretrain)
        rows_ref = _file_ref(folder, "pretrain.jsonl", pretrain_rows(spec["updates"] * spec["batch_size"], seed))
        manifest["model"]["tiny"] = {**manifest["model"]["tiny"], "pretrain": {"rows": rows_ref, **spec}}
    path = folder / "manifest.json"
    path.write_text(json.dumps(manifest, indent=1))
    return path


def rewrite_manifest(path: Path, edit) -> Path:
    """Apply `edit(manifest_dict)` and write it back (for invalid-manifest tests)."""
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=1))
    return path
