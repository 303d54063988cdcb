"""Host (CPU) time of an evaluation phase outside the model: the candidates' in-context tokenization
(`trie.code_token_lists`) and the tree building (`trie._Probe`, what `TreeBatcher.add` builds per
probe), for every probe of a planned manifest, on the hf test models' real tokenizers (no model
call is timed: on a GPU this is the time the device waits for the host).

    trainer-py/.venv/bin/python bench/eval_host.py --manifest RUN/manifest.json [--trainer trainer-py]
        [--families qwen3 llama3] [--phases 2]

The manifest: e.g. a plan of the paper-email probes (64 focal + 64 held-out canaries x hidden,
supplied, substituted = 384 probes, 10,000 four-digit codes each). --trainer picks the trainer
checkout whose `canary_trainer` is imported, so two versions can be compared by alternating
processes. One process per call; --phases phases in a row with the process's caches as a run has
them (the first phase starts empty). Prints one JSON line per family: CPU seconds per phase of
tokenization and of tree building, and how many distinct tokenizations were made.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--trainer", default=str(ROOT / "trainer-py"))
    ap.add_argument("--families", nargs="+", default=["qwen3", "llama3"])
    ap.add_argument("--phases", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(args.trainer).resolve()))
    sys.path.insert(1, str(ROOT / "trainer-py"))  # tests.* (the fixtures) from this checkout
    import torch

    torch.set_num_threads(int(os.environ.get("CANARY_TRAINER_THREADS", "1")))
    from canary_trainer.manifest import exhaustive_codes
    from canary_trainer.scoring import tree as trie
    from tests.hf_fixtures import build_hub, use_hub

    use_hub(build_hub())
    from tests.test_hf_backend import backend

    probes = json.loads(Path(args.manifest).read_text())["probes"]
    codes = exhaustive_codes("0123456789", 4)
    for family in args.families:
        b = backend(family)
        calls = {"n": 0}
        batch = b.tokenize_batch

        def counted(texts, batch=batch, calls=calls):
            if len(texts) >= len(codes):
                calls["n"] += 1
            return batch(texts)

        b.tokenize_batch = counted
        # the evaluator's span cache (an explicit SpanCache in newer trainers, a module dict before)
        cache = trie.SpanCache() if hasattr(trie, "SpanCache") else None
        getattr(trie, "_SPANS", {}).clear()
        getattr(trie, "_TRIES", {}).clear()
        phases = []
        for _ in range(args.phases):
            tok = build = 0.0
            calls["n"] = 0
            for p in probes:
                ctx = b.render(p["prompt"]) + p["prefill"]
                ids = b.tokenize(ctx)
                c0 = time.process_time()
                split = (trie.code_token_lists(b, ctx, ids, codes, cache) if cache is not None
                         else trie.code_token_lists(b, ctx, ids, codes))
                c1 = time.process_time()
                trie._Probe(p["id"], ids, split)
                c2 = time.process_time()
                tok += c1 - c0
                build += c2 - c1
            phases.append({"tokenize_cpu_s": round(tok, 2), "trie_cpu_s": round(build, 2),
                           "host_cpu_s": round(tok + build, 2), "full_tokenizations": calls["n"]})
        print(json.dumps({"family": family, "trainer": args.trainer, "probes": len(probes), "phases": phases}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
