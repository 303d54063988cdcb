"""GPU figures for the hf backend on a random-initialised Qwen3-1.7B-shaped model (one H200).

    PYTHONPATH=trainer-py python3 bench/gpu/hf_bench.py --out "$OUT/hf_bench.json"

Needs torch 2.x with CUDA, transformers (4.45+ or 5.x) and tokenizers; downloads nothing: the
tokenizer is built locally with `tokenizers` (digits one token each, as in Qwen tokenizers) and
the model is built from a config with random weights (vocabulary 151,936 as in Qwen3, so the output
layer costs what it costs in the real model).

Measures, in one process:
  * scoring: candidates/s over all 10,000 four-digit codes with the prefix tree vs one sequence per
    candidate (a 1,000-code slice; both are rates), in bf16 under autocast; agreement checked in
    float32 (TF32 off) on a 500-code slice, and the bf16 difference reported;
  * training: full fine-tuning tokens/s (float32 master weights, bf16 autocast, AdamW), batch 16.
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

    torch.cuda.synchronize()


def timed(fn, repeats=1):
    best, value = float("inf"), None
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        value = fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best, value


def build_model_dir(folder: Path, layers: int | None) -> Path:
    import transformers

    from tests.hf_fixtures import build_tokenizer

    tok = build_tokenizer()
    cfg_cls = getattr(transformers, "Qwen3Config", None) or transformers.Qwen2Config
    sizes = dict(QWEN3_1_7B)
    if layers:
        sizes["num_hidden_layers"] = layers
    if cfg_cls is transformers.Qwen2Config:
        sizes.pop("head_dim")
    config = cfg_cls(**sizes, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("hf_bench.json"))
    ap.add_argument("--layers", type=int, default=None, help="override num_hidden_layers (smoke runs)")
    ap.add_argument("--per-candidate", type=int, default=1000)
    ap.add_argument("--train-updates", type=int, default=8)
    args = ap.parse_args()

    import numpy as np
    import torch

    if not torch.cuda.is_available():
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
    from canary_trainer.score import TokenCheck, score_per_candidate, score_tree
    from canary_trainer.train import make_optimizer, train_update
    from tests.fixtures import canary_prefill, canary_prompt, make_run

    figures: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                     "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                     "transformers": transformers.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model_dir(Path(tmp) / "qwen3-1.7b-shape", args.layers)
        spec = {"backend": "hf", "name": str(model_dir), "revision": None, "init_seed": 0,
                "hf": {"dtype": "bfloat16", "random_init": True, "config_overrides": {}, "chat_template_kwargs": {},
                       "trust_remote_code": False, "attn_implementation": None},
                "finetune": {"method": "full"}}
        t0 = time.perf_counter()
        b = HfBackend(spec, torch.device("cuda", 0))
        figures["build_s"] = round(time.perf_counter() - t0, 1)
        figures["parameters"] = b.describe()["parameters"]

        # ---- scoring -------------------------------------------------------------------------
        b.model.eval()
        identity = "Grace Hopper #3"
        ctx = b.render(canary_prompt(identity, "[redacted]")) + canary_prefill(identity)
        ids = b.tokenize(ctx)
        codes = exhaustive_codes("0123456789", 4)
        check_s, tok = timed(lambda: TokenCheck(b).code_tokens(ctx, ids, codes))
        if tok is None:
            print("tokenizer does not split digits one per token: no prefix-tree path", file=sys.stderr)
            return 1
        subset = codes[:: len(codes) // args.per_candidate][: args.per_candidate]
        idx = [int(c) for c in subset]
        with torch.no_grad(), b.autocast():
            score_tree(b, ids, tok, 1024)  # warm-up (kernels, allocator)
            tree_s, fast = timed(lambda: score_tree(b, ids, tok, 1024), repeats=3)
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
            fast32 = score_tree(b, ids, tok, 1024)
            slow32 = score_per_candidate(b, ctx, ids, check, batch=100)
        diff32 = float(np.max(np.abs(fast32[[int(c) for c in check]] - slow32)))
        figures["scoring"]["float32_max_abs_diff"] = diff32
        torch.backends.cuda.matmul.allow_tf32 = True

        # ---- training ------------------------------------------------------------------------
        b.model.train()
        manifest = make_run(Path(tmp) / "run", updates=args.train_updates + 2, batch_size=16,
                            model={**spec, "name": str(model_dir)}, training={"device": "cuda"})
        m = load_manifest(manifest)
        rows = read_rows(m.folder / "rows.jsonl", m.data["rows"]["sha256"], m.data["rows"]["count"], "rows")
        encoded = encode_rows(b, rows, 256, Path("rows.jsonl"))
        opt = make_optimizer(b, {**m.training, "lr": 1e-5})
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
            "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1),
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


if __name__ == "__main__":
    sys.exit(main())
