"""The scoring head's vocabulary tiling: the tree scorer's output projection + log-sum-exp over
VOCAB_TILE-column chunks (`hf_tree._head_logprobs`, online log-sum-exp) vs the untiled blocks it
replaced (HEAD_ROWS x vocabulary logits per block, torch.logsumexp), on the hf test models' real
vocabularies (Qwen3 151,936, Llama 3 128,256), CPU float32, interleaved in one run.

    trainer-py/.venv/bin/python bench/trainer_head_tile.py [--families qwen3 llama3] [--nodes 1111] [--repeats 5]

Per family: the decoder's last hidden states of --nodes positions (a four-digit probe's tree has
1,111 nodes), ten asked columns per node (the digits' tokens, as the tree asks), scored by both
heads, alternating which goes first, --repeats times; medians, spreads and the ratio
untiled / tiled (above 1: tiling is faster). The two must agree within 1e-5 (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import sys

import torch
from _common import each_family, setup_hf, summary, threads, timed

from canary_trainer.backends import hf_tree  # noqa: E402
from canary_trainer.memory import HEAD_ROWS, VOCAB_TILE  # noqa: E402
from tests.head_ref import untiled_head_logprobs  # noqa: E402


def untiled(model, config, hidden, rows, cols):
    """The head before tiling (tests/head_ref.py): (HEAD_ROWS, V) float32 logits per block."""
    cap = getattr(config, "final_logit_softcapping", None)
    return untiled_head_logprobs(hidden, model.get_output_embeddings(), cap, rows, cols)


def bench(family: str, args) -> dict:
    from tests.test_hf_backend import backend

    b = backend(family)
    model, config = b.base_model, b.text_config
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (1, args.nodes), generator=g)
    hidden = model.get_decoder()(input_ids=ids).last_hidden_state[0]  # (N, H)
    digits = torch.tensor([b.tokenize(str(d))[-1] for d in range(10)])
    rows = torch.arange(args.nodes).repeat_interleave(10)
    cols = digits.repeat(args.nodes)
    times: dict[str, list[float]] = {"tiled": [], "untiled": []}
    diff = 0.0
    for k in range(args.repeats):
        order = ("tiled", "untiled") if k % 2 == 0 else ("untiled", "tiled")
        got = {}
        for name in order:
            fn = hf_tree._head_logprobs if name == "tiled" else untiled
            got[name], _, cpu = timed(lambda fn=fn: fn(model, config, hidden, rows, cols))
            times[name].append(cpu)
        diff = max(diff, float((got["tiled"].double() - got["untiled"].double()).abs().max()))
    return {"family": family, "vocab": config.vocab_size, "nodes": args.nodes, "head_rows": HEAD_ROWS,
            "vocab_tile": VOCAB_TILE, "threads": threads(), "repeats": args.repeats, "cpu": "process CPU s",
            **summary(times, "tiled", "untiled", digits=3, ratio_digits=2), "max_abs_diff": diff}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", nargs="+", default=["qwen3", "llama3"])
    ap.add_argument("--nodes", type=int, default=1111, help="hidden states scored (a 4-digit tree: 1,111)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    setup_hf()
    return each_family(args.families, lambda f: bench(f, args), lambda row: row["max_abs_diff"] <= 1e-5)


if __name__ == "__main__":
    sys.exit(main())
