"""Tiny-backend training speed, and one whole quickstart-sized run.

    PY=trainer-py/.venv/bin/python                        # the trainer venv (bash .ci/setup)
    $PY bench/trainer_train.py                            # speed: sizes x threads, batch 16
    $PY bench/trainer_train.py --full-run                 # + one run: 200 updates, 40 probes, 1 thread
    $PY bench/trainer_train.py --threads 1 --compare-python /usr/bin/python3 --full-run
        # the same, each measurement also under another interpreter (e.g. another torch), interleaved

Speed: rows like the quickstart's (~150 characters of text, ~170 tokens with chat markers), batch
16; each (size, threads) pair runs in its own process, pairs interleaved over --rounds so a busy
neighbour slows all of them alike. Prints median and best updates/s and rows/s, and for each size
the 2-thread speed-up over 1 thread (the baseline measured side by side).

Full run: the CLI end to end on a manifest like the quickstart's (10 focal canaries at dose 8,
10 held-out, hidden + supplied probes over all 10,000 codes), with the wall time split into
training and evaluation, and the median exposure of inserted vs held-out canaries: a size is only
useful if the run shows memorization above the control.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAINER = ROOT / "trainer-py"
sys.path.insert(0, str(TRAINER))

SIZES = {"default d128 L2 H4": (128, 2, 4), "small d64 L2 H2": (64, 2, 2), "medium d96 L2 H4": (96, 2, 4)}


def worker(d: int, layers: int, heads: int, threads: int, updates: int) -> dict:
    import torch

    from canary_trainer.backends.tiny import TinyBackend
    from canary_trainer.batches import encode_rows
    from canary_trainer.manifest import load_manifest
    from canary_trainer.rows import read_rows
    from canary_trainer.train import make_optimizer, train_update
    from tests.fixtures import make_run

    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        path = make_run(Path(tmp), updates=updates + 2, batch_size=16, tiny={"n_layer": layers, "n_head": heads,
                                                                                "d_model": d, "max_len": 256})
        m = load_manifest(path)
        rows = read_rows(m.folder / "rows.jsonl", m.data["rows"]["sha256"], m.data["rows"]["count"], "rows")
    backend = TinyBackend(m.model, torch.device("cpu"))
    encoded = encode_rows(backend, rows, 256, Path("rows.jsonl"))
    opt = make_optimizer(backend, m.training)
    times = []
    for u in range(updates + 2):
        t0 = time.perf_counter()
        train_update(backend, opt, encoded, u, m.training)
        if u >= 2:  # the first updates pay allocation warm-up
            times.append(time.perf_counter() - t0)
    chars = statistics.mean(len(r["prompt"][0]["content"]) + len(r["target"]) for r in rows)
    toks = statistics.mean(len(e.ids) for e in encoded)
    return {"median_s": statistics.median(times), "best_s": min(times), "chars_per_row": chars, "tokens_per_row": toks}


def torch_version(python: str) -> str:
    return subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True,
                          check=True).stdout.strip()


def speed(args, pythons: list[str]) -> dict[str, dict]:
    """Per interpreter: {(size, threads): [worker results]}, interpreters interleaved per measurement."""
    results: dict[str, dict] = {py: {} for py in pythons}
    for _ in range(args.rounds):
        for name, (d, layers, heads) in SIZES.items():
            for threads in args.threads:
                for py in pythons:
                    out = subprocess.run([py, __file__, "--worker", f"{d},{layers},{heads},{threads}",
                                          "--updates", str(args.updates)], capture_output=True, text=True, check=True)
                    results[py].setdefault((name, threads), []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    return results


def speed_table(results: dict) -> dict:
    table = {}
    for (name, threads), runs in results.items():
        med = statistics.median(r["median_s"] for r in runs)
        best = min(r["best_s"] for r in runs)
        table[f"{name} threads={threads}"] = {
            "updates_per_s_median": round(1 / med, 2), "updates_per_s_best": round(1 / best, 2),
            "rows_per_s_median": round(16 / med, 1), "rows_per_s_best": round(16 / best, 1),
            "chars_per_row": round(runs[0]["chars_per_row"]), "tokens_per_row": round(runs[0]["tokens_per_row"])}
    for name in SIZES:
        one, two = table.get(f"{name} threads=1"), table.get(f"{name} threads=2")
        if one and two:
            table[f"{name} speed-up 2 vs 1 threads"] = round(two["updates_per_s_median"] / one["updates_per_s_median"], 2)
    return table


def full_run(args, python: str) -> dict:
    import numpy as np

    from tests.fixtures import make_run

    d, layers, heads = SIZES[args.full_size]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        manifest = make_run(folder, updates=200, batch_size=16, n_focal=10, n_held=10, dose=8, visibility="redacted",
                            kinds=("hidden", "supplied"), lr=1e-2, schedule={"kind": "cosine", "warmup_updates": 20},
                            tiny={"n_layer": layers, "n_head": heads, "d_model": d, "max_len": 256},
                            checkpoint_every=50, decode=("prefill",), max_new_tokens=16)
        env = {**os.environ, "PYTHONPATH": str(TRAINER), "CANARY_TRAINER_THREADS": "1"}
        t0 = time.perf_counter()
        subprocess.run([python, "-m", "canary_trainer", "run", "--manifest", str(manifest), "--out",
                        str(folder / "out")], env=env, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        result = json.loads((folder / "out" / "result.json").read_text())
        data = json.loads(manifest.read_text())
        codes = {c["id"]: int(c["code"]) for c in data["canaries"] + data["held_out"]}
        exposure: dict = {}
        for p in result["evaluations"][-1]["probes"]:
            s = np.fromfile(folder / "out" / p["scores_file"], dtype="<f4")
            rank = int((s >= s[codes[p["canary_id"]]]).sum())
            exposure.setdefault(f"{p['arm']}/{p['kind']}", []).append(np.log2(10000) - np.log2(rank))
    return {"size": args.full_size, "wall_s": round(wall, 1), "train_s": result["training"]["wall_s"],
            "eval_s": result["evaluations"][-1]["wall_s"], "probes": len(result["evaluations"][-1]["probes"]),
            "final_loss": round(result["training"]["final_loss"], 3),
            "median_exposure": {k: round(float(np.median(v)), 2) for k, v in sorted(exposure.items())},
            "exposure_ceiling": round(float(np.log2(10000)), 2)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--updates", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    ap.add_argument("--full-run", action="store_true")
    ap.add_argument("--full-size", default="small d64 L2 H2", choices=list(SIZES))
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--compare-python", action="append", default=[],
                    help="also measure under this interpreter (repeatable); ratios are against this one")
    args = ap.parse_args()
    if args.worker:
        d, layers, heads, threads = (int(x) for x in args.worker.split(","))
        print(json.dumps(worker(d, layers, heads, threads, args.updates)))
        return 0
    pythons = [sys.executable, *args.compare_python]
    label = {py: f"{py} (torch {torch_version(py)})" for py in pythons}
    figures: dict = {}
    if not args.skip_speed:
        tables = {py: speed_table(runs) for py, runs in speed(args, pythons).items()}
        figures["speed"] = {label[py]: t for py, t in tables.items()}
        for py in args.compare_python:
            figures.setdefault("speed_ratio_vs_" + label[sys.executable], {})[label[py]] = {
                key: round(tables[sys.executable][key]["updates_per_s_median"] / tables[py][key]["updates_per_s_median"], 2)
                for key in tables[py] if isinstance(tables[py][key], dict)}
    if args.full_run:
        runs = {}
        for py in pythons:  # one after the other
            runs[label[py]] = full_run(args, py)
        figures["full_run"] = runs
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
