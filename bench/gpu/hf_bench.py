"""GPU figures for the hf backend on a random-initialised Qwen3-1.7B-shaped model (one H200).

    PYTHONPATH=trainer-py python3 bench/gpu/hf_bench.py --out "$OUT/hf_bench.json"

Needs torch 2.x with CUDA, transformers 5.x and tokenizers; downloads nothing: the tokenizer is
the real Qwen3 one from the test models' cache (tests/hf_fixtures.py builds it on any machine with
node_modules; carry node_modules/.cache/canary-audit/hf-hub/models--canary-test--tiny-qwen3 to a
GPU machine, or pass --tokenizer DIR) and the model is built from a config with random weights
(vocabulary 151,936 as in Qwen3, so the output layer costs what it costs in the real model).
--hidden/--layers shrink it for a CPU smoke run (--device cpu).

Measures, in one process:
  * scoring: candidates/s over all 10,000 four-digit codes with the token-level prefix tree (tree
    attention) vs one sequence per candidate (a 1,000-code slice; both are rates), in bf16 under
    autocast; agreement checked in float32 (TF32 off) on a 500-code slice, and the bf16 difference;
  * an evaluation phase: --canaries canaries x 3 probes x 10,000 candidates, scores (probes batched
    across tree-attention calls, as many per call as half the free GPU memory allows) and batched
    greedy (both modes): per run, wall, scoring and greedy seconds, tree groups and calls, peak
    memory (goal <= 10 s on one H200);
  * training: full fine-tuning tokens/s (float32 master weights, bf16 autocast, AdamW), batch 16.
--gpus N (multi-GPU mode, instead of the above): the trainer's own run of one manifest on one GPU
and sharded over N (FSDP2 under torch.distributed.run), twice, interleaved: tokens/s of each and
their ratio, the memory estimate each logged, and the loss-curve and score differences (bf16).
Writes a JSON of figures (date, GPU, versions) to --out and prints it. Exit 1 when the float32
check fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "trainer-py"))

QWEN3_1_7B = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                  rms_norm_eps=1e-6, tie_word_embeddings=True)


def sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def peak_gib() -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 1) if torch.cuda.is_available() else None


def eval_phase(b, spec: dict, tmp: Path, canaries: int) -> dict:
    """One evaluation phase (scores + batched greedy) of `canaries` x 3 probes, run twice (the first
    warms the kernels and the tokenizer caches): per run, wall seconds, the scoring and greedy
    seconds, the tree-attention groups and calls (probes batched across calls by the memory bound),
    and the peak GPU memory of that run."""
    import torch

    from canary_trainer.evaluate import Evaluator
    from canary_trainer.events import Events
    from canary_trainer.interrupt import StopFlag
    from canary_trainer.manifest import load_manifest
    from tests.fixtures import make_run

    path = make_run(tmp / "eval", updates=2, batch_size=2, n_focal=canaries, n_held=0, model=spec,
                    training={"device": str(b.device.type)}, max_new_tokens=48)
    ev = Evaluator(b, load_manifest(path), tmp / "eval" / "out", Events(stream=open("/dev/null", "w")), StopFlag())
    runs = []
    for n in range(2):
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        wall, entry = timed(lambda n=n: ev.run_phase(f"update-{n}", n))
        runs.append({"wall_s": round(wall, 2), "scoring_s": round(ev.stats["scoring_s"], 2),
                     "greedy_s": round(ev.stats["greedy_s"], 2), "tree_groups": ev.stats["tree_groups"],
                     "tree_calls": ev.stats["tree_calls"], "peak_memory_gib": peak_gib()})
        print(f"evaluation phase run {n + 1}: {json.dumps(runs[-1])}", file=sys.stderr, flush=True)
    steps = [len(b.tokenize(g["text"])) for p in entry["probes"] for g in p["greedy"].values()]
    return {"probes": len(entry["probes"]), "candidates": entry["probes"][0]["n_candidates"],
            "runs": runs, "scoring": ev.scoring, "greedy_tokens_per_decode": round(sum(steps) / len(steps), 1)}


def timed(fn, repeats=1):
    best, value = float("inf"), None
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        value = fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best, value


def tokenizer_dir(given: Path | None) -> Path:
    if given:
        return given
    from tests.hf_fixtures import HUB

    snaps = sorted((HUB / "models--canary-test--tiny-qwen3" / "snapshots").glob("*"))
    if not snaps:
        raise SystemExit(f"no Qwen3 tokenizer under {HUB}: run the hf tests once, or pass --tokenizer")
    return snaps[-1]


def build_model_dir(folder: Path, args) -> Path:
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir(args.tokenizer)))
    sizes = dict(QWEN3_1_7B)
    if args.layers:
        sizes["num_hidden_layers"] = args.layers
    if args.hidden:
        sizes.update(hidden_size=args.hidden, intermediate_size=3 * args.hidden)
    config = transformers.Qwen3Config(**sizes, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("hf_bench.json"))
    ap.add_argument("--layers", type=int, default=None, help="override num_hidden_layers (smoke runs)")
    ap.add_argument("--hidden", type=int, default=None, help="override hidden_size (smoke runs)")
    ap.add_argument("--canaries", type=int, default=64)
    ap.add_argument("--tokenizer", type=Path, default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--per-candidate", type=int, default=1000)
    ap.add_argument("--train-updates", type=int, default=8)
    ap.add_argument("--gpus", type=int, default=0,
                    help="multi-GPU mode: the same run sharded over N GPUs (FSDP2, torch.distributed.run) and on one")
    args = ap.parse_args()
    if args.gpus > 0:
        return multi_gpu(args)

    import numpy as np
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: this benchmark needs a GPU", file=sys.stderr)
        return 2
    try:
        import transformers
    except ImportError:
        print("transformers is not installed: pip install transformers tokenizers", file=sys.stderr)
        return 2

    from canary_trainer.backends.hf import HfBackend
    from canary_trainer.batches import encode_rows
    from canary_trainer.manifest import exhaustive_codes, load_manifest
    from canary_trainer.rows import read_rows
    from canary_trainer.score import score_per_candidate
    from canary_trainer.trie import code_token_lists, score_trie
    from canary_trainer.train import make_optimizer, train_update
    from tests.fixtures import canary_prefill, canary_prompt, make_run

    figures: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                     "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
                     "torch": torch.__version__,
                     "transformers": transformers.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model_dir(Path(tmp) / "qwen3-1.7b-shape", args)
        spec = {"backend": "hf", "name": str(model_dir), "revision": None, "init_seed": 0,
                "hf": {"dtype": "bfloat16", "random_init": True, "config_overrides": {},
                       "chat_template_kwargs": {"enable_thinking": False},
                       "trust_remote_code": False, "attn_implementation": None},
                "finetune": {"method": "full"}}
        t0 = time.perf_counter()
        device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
        b = HfBackend(spec, device)
        figures["build_s"] = round(time.perf_counter() - t0, 1)
        figures["parameters"] = b.describe()["parameters"]

        # ---- scoring -------------------------------------------------------------------------
        b.model.eval()
        identity = "Grace Hopper #3"
        ctx = b.render(canary_prompt(identity, "[redacted]")) + canary_prefill(identity)
        ids = b.tokenize(ctx)
        codes = exhaustive_codes("0123456789", 4)
        check_s, split = timed(lambda: code_token_lists(b, ctx, ids, codes))
        subset = codes[:: len(codes) // args.per_candidate][: args.per_candidate]
        idx = [int(c) for c in subset]
        with torch.no_grad(), b.autocast():
            score_trie(b, ids, split)  # warm-up (kernels, allocator)
            tree_s, fast = timed(lambda: score_trie(b, ids, split), repeats=3)
            score_per_candidate(b, ctx, ids, subset[:100], batch=100)
            per_s, slow = timed(lambda: score_per_candidate(b, ctx, ids, subset, batch=100))
        figures["scoring"] = {
            "prompt_tokens": len(ids), "candidates": len(codes), "split_check_s": round(check_s, 3),
            "tree_s_per_probe": round(tree_s, 4), "tree_candidates_per_s": round(len(codes) / tree_s, 1),
            "per_candidate_candidates_per_s": round(len(subset) / per_s, 1),
            "ratio": round((len(codes) / tree_s) / (len(subset) / per_s), 1),
            "bf16_max_abs_diff": float(np.max(np.abs(fast[idx] - slow))),
        }
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        check = subset[:500]
        with torch.no_grad():  # float32 master weights, no autocast: the exactness check
            fast32 = score_trie(b, ids, split)
            slow32 = score_per_candidate(b, ctx, ids, check, batch=100)
        diff32 = float(np.max(np.abs(fast32[[int(c) for c in check]] - slow32)))
        figures["scoring"]["float32_max_abs_diff"] = diff32
        torch.backends.cuda.matmul.allow_tf32 = True
        figures["evaluation_phase"] = eval_phase(b, spec, Path(tmp), args.canaries)

        # ---- training ------------------------------------------------------------------------
        b.model.train()
        manifest = make_run(Path(tmp) / "run", updates=args.train_updates + 2, batch_size=16,
                            model={**spec, "name": str(model_dir)}, training={"device": "cuda"})
        m = load_manifest(manifest)
        rows = read_rows(m.folder / "rows.jsonl", m.data["rows"]["sha256"], m.data["rows"]["count"], "rows")
        encoded = encode_rows(b, rows, 256, Path("rows.jsonl"))
        opt = make_optimizer(b, {**m.training, "lr": 1e-5})
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        times, tokens = [], []
        for u in range(args.train_updates + 2):
            sync()
            t0 = time.perf_counter()
            res = train_update(b, opt, encoded, u, {**m.training, "lr": 1e-5, "loss_explode": 1e9})
            sync()
            if u >= 2:
                times.append(time.perf_counter() - t0)
                tokens.append(res.tokens)
        figures["training"] = {
            "batch_rows": 16, "tokens_per_row": round(sum(tokens) / len(tokens) / 16, 1),
            "tokens_per_s": round(sum(tokens) / sum(times), 1), "updates_per_s": round(len(times) / sum(times), 3),
            "peak_memory_gib": peak_gib(),
            "mode": "full fine-tuning, float32 master weights, bf16 autocast, AdamW",
        }
    text = json.dumps(figures, indent=1)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    if diff32 >= 1e-3:
        print(f"FAIL: float32 prefix tree vs per-candidate differ by {diff32:.2e}", file=sys.stderr)
        return 1
    return 0


def multi_gpu(args) -> int:
    """The trainer's own run, end to end, on one GPU and sharded over --gpus N (FSDP2 under
    torch.distributed.run, as the worker starts it), of the same manifest rows: training tokens/s
    and wall seconds of each, their ratio, peak memory per GPU from the trainer's log, and how far
    the loss curves and scores of the two runs are apart. Runs the pair twice, interleaved
    (one, N, one, N), and reports each figure per round."""
    import subprocess

    import numpy as np
    import torch

    from tests.fixtures import make_run

    if args.device != "cuda" or torch.cuda.device_count() < args.gpus:
        print(f"multi-GPU mode needs {args.gpus} CUDA devices; found {torch.cuda.device_count()}", file=sys.stderr)
        return 2
    figures: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                     "gpu": torch.cuda.get_device_name(0), "gpus": args.gpus, "torch": torch.__version__, "rounds": []}
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT / "trainer-py"), "CANARY_TRAINER_PARENT_WATCH": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model_dir(Path(tmp) / "qwen3-1.7b-shape", args)
        spec = {"backend": "hf", "name": str(model_dir), "revision": None, "init_seed": 0,
                "hf": {"dtype": "bfloat16", "random_init": True, "config_overrides": {},
                       "chat_template_kwargs": {"enable_thinking": False},
                       "trust_remote_code": False, "attn_implementation": None},
                "finetune": {"method": "full"}}
        kw = dict(updates=args.train_updates, batch_size=16, model=spec, checkpoint_every=max(1, args.train_updates),
                  length=4, n_focal=2, n_held=1, kinds=("hidden",), decode=("prefill",), max_new_tokens=8)
        manifests = {1: make_run(Path(tmp) / "one", training={"device": "cuda"}, **kw),
                     args.gpus: make_run(Path(tmp) / "many", training={"device": "cuda", "gpus": args.gpus,
                                                                        "parallel": "fsdp"}, **kw)}
        for round_ in range(2):
            row = {}
            for n, manifest in manifests.items():
                out = Path(tmp) / f"out-{n}-{round_}"
                launch = ["-m", "canary_trainer"] if n == 1 else \
                    ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n), "-m", "canary_trainer"]
                t0 = time.perf_counter()
                proc = subprocess.run([sys.executable, *launch, "run", "--manifest", str(manifest), "--out", str(out)],
                                      capture_output=True, text=True, env={**env, "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(n)))})
                wall = time.perf_counter() - t0
                if proc.returncode != 0:
                    print(proc.stderr[-4000:], file=sys.stderr)
                    return 1
                result = json.loads((out / "result.json").read_text())
                estimate = [line for line in proc.stderr.splitlines() if "memory estimate" in line]
                row[n] = {"wall_s": round(wall, 1), "tokens_per_s": result["training"]["tokens_per_s"],
                          "train_wall_s": result["training"]["wall_s"], "memory_estimate": estimate[-1] if estimate else None,
                          "curve": [p[1] for p in result["training"]["loss_curve"]],
                          "scores": {p["probe_id"]: np.fromfile(out / p["scores_file"], dtype="<f4")
                                     for p in result["evaluations"][-1]["probes"]}}
            one, many = row[1], row[args.gpus]
            figures["rounds"].append({
                "one_gpu": {k: one[k] for k in ("wall_s", "tokens_per_s", "train_wall_s", "memory_estimate")},
                f"{args.gpus}_gpus": {k: many[k] for k in ("wall_s", "tokens_per_s", "train_wall_s", "memory_estimate")},
                "tokens_per_s_ratio": round(many["tokens_per_s"] / one["tokens_per_s"], 3),
                "loss_curve_max_abs_diff": float(np.max(np.abs(np.array(one["curve"]) - np.array(many["curve"])))),
                "scores_max_abs_diff": float(max(np.max(np.abs(one["scores"][k] - many["scores"][k])) for k in one["scores"])),
            })
    text = json.dumps(figures, indent=1)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
