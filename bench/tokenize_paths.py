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
import statistics
import sys

from _common import each_family, setup_hf, spread, timed

from canary_trainer.manifest import exhaustive_codes  # noqa: E402
from canary_trainer.scoring.tree import code_token_lists  # noqa: E402
from tests.fixtures import canary_prefill, canary_prompt  # noqa: E402


def bench_family(family: str, repeats: int) -> dict:
    from tests.test_hf_backend import backend

    codes = exhaustive_codes("0123456789", 4)
    b = backend(family)
    ident = "Ada Lovelace #0"
    ctx = b.render(canary_prompt(ident, "[redacted]")) + canary_prefill(ident)
    ids = b.tokenize(ctx)
    direct = b._rust_for()
    assert direct is not None, f"{family}: no Rust tokenizer"
    times: dict[str, list[float]] = {"direct": [], "wrapper": []}
    splits = {}
    for r in range(repeats):
        for name in (("direct", "wrapper") if r % 2 == 0 else ("wrapper", "direct")):
            b._rust = (b.tokenizer, direct if name == "direct" else None)  # None: the wrapper
            splits[name], _, cpu = timed(lambda: code_token_lists(b, ctx, ids, codes))  # no cache: afresh
            times[name].append(cpu)
    b._rust = (b.tokenizer, direct)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"family": family, "repeats": repeats, "same_split": splits["direct"] == splits["wrapper"],
            "direct_cpu_s": round(med["direct"], 3), "direct_spread": spread(times["direct"]),
            "wrapper_cpu_s": round(med["wrapper"], 3), "wrapper_spread": spread(times["wrapper"]),
            "ratio": round(med["wrapper"] / med["direct"], 2)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", nargs="+", default=["qwen3", "llama3"])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    setup_hf()
    return each_family(args.families, lambda family: bench_family(family, args.repeats), lambda row: row["same_split"])


if __name__ == "__main__":
    sys.exit(main())
