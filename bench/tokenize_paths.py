"""The candidates' in-context tokenization (`trie.code_token_lists`: 10,000 four-digit codes after a
canary context, no cache carried over) through the Rust tokenizer called directly (what the hf
backend does, `hf_text.rust_tokenizer`) vs through the transformers wrapper, on the hf test models'
real tokenizers; interleaved (the order alternates per repeat), CPU seconds of this process (the
Rust tokenizer's own threads included), the splits checked identical.

    CANARY_TRAINER_THREADS=1 trainer-py/.venv/bin/python bench/tokenize_paths.py [--families qwen3 llama3]
        [--repeats 5]

Prints one JSON line per family: median CPU seconds of each path, their spreads (min-max) and the
ratio wrapper / direct. Exit 1 when the two splits differ.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "trainer-py"))

from canary_trainer.manifest import exhaustive_codes  # noqa: E402
from canary_trainer.trie import code_token_lists  # noqa: E402
from tests.fixtures import canary_prefill, canary_prompt  # noqa: E402
from tests.hf_fixtures import build_hub, use_hub  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", nargs="+", default=["qwen3", "llama3"])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(int(os.environ.get("CANARY_TRAINER_THREADS", "1")))
    use_hub(build_hub())
    from tests.test_hf_backend import backend

    ok = True
    codes = exhaustive_codes("0123456789", 4)
    for family in args.families:
        b = backend(family)
        ident = "Ada Lovelace #0"
        ctx = b.render(canary_prompt(ident, "[redacted]")) + canary_prefill(ident)
        ids = b.tokenize(ctx)
        direct = b._rust_for()
        assert direct is not None, f"{family}: no Rust tokenizer"
        times: dict[str, list[float]] = {"direct": [], "wrapper": []}
        splits = {}
        for r in range(args.repeats):
            for name in (("direct", "wrapper") if r % 2 == 0 else ("wrapper", "direct")):
                b._rust = (b.tokenizer, direct if name == "direct" else None)  # None: the wrapper
                c0 = time.process_time()
                splits[name] = code_token_lists(b, ctx, ids, codes)  # no cache: tokenized afresh
                times[name].append(time.process_time() - c0)
        b._rust = (b.tokenizer, direct)
        same = splits["direct"] == splits["wrapper"]
        ok &= same
        med = {k: statistics.median(v) for k, v in times.items()}
        print(json.dumps({"family": family, "repeats": args.repeats, "same_split": same,
                          "direct_cpu_s": round(med["direct"], 3),
                          "direct_spread": [round(min(times["direct"]), 3), round(max(times["direct"]), 3)],
                          "wrapper_cpu_s": round(med["wrapper"], 3),
                          "wrapper_spread": [round(min(times["wrapper"]), 3), round(max(times["wrapper"]), 3)],
                          "ratio": round(med["wrapper"] / med["direct"], 2)}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
