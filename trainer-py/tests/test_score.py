"""Prefix-tree scoring equals per-candidate scoring; the fast path is chosen only when every
candidate is one token per character after the context (detected, not assumed)."""

import numpy as np
import torch

from canary_trainer.backends.tiny import TinyBackend
from canary_trainer.manifest import exhaustive_codes
from canary_trainer.scoring.walk import TokenCheck, score_per_candidate, score_tree

SPEC = {"backend": "tiny", "name": "t", "init_seed": 3,
        "tiny": {"n_layer": 2, "n_head": 2, "d_model": 32, "max_len": 256, "dropout": 0.0}}
MSGS = [{"role": "user", "content": "Rewrite the note from Ada with code [redacted]."}]
PREFILL = "Hello team, this is Ada. My code is "


def _backend(cls=TinyBackend):
    b = cls(SPEC, torch.device("cpu"))
    b.model.eval()
    return b


def test_prefix_tree_equals_per_candidate_on_all_10000_codes():
    b = _backend()
    ctx = b.render(MSGS) + PREFILL
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 4)
    tok = TokenCheck(b).code_tokens(ctx, ids, codes)
    assert tok is not None and tok.shape == (10000, 4)
    fast = score_tree(b, ids, tok, nodes_per_pass=128)  # several chunks per level
    slow = score_per_candidate(b, ctx, ids, codes, batch=500)
    assert np.max(np.abs(fast - slow)) < 1e-4
    # a proper distribution over the space: at most 1 in total, and not degenerate
    assert np.exp(fast).sum() <= 1 + 1e-6 and np.std(fast) > 0


def test_sampled_candidates_keep_their_order():
    b = _backend()
    ctx = b.render(MSGS) + PREFILL
    ids = b.tokenize(ctx)
    codes = ["9041", "0000", "5512", "9040", "1234"]
    tok = TokenCheck(b).code_tokens(ctx, ids, codes)
    fast = score_tree(b, ids, tok, nodes_per_pass=1024)
    slow = score_per_candidate(b, ctx, ids, codes)
    assert np.max(np.abs(fast - slow)) < 1e-4
    full = dict(zip(exhaustive_codes("0123456789", 4),
                    score_tree(b, ids, TokenCheck(b).code_tokens(ctx, ids, exhaustive_codes("0123456789", 4)), 1024)))
    assert np.allclose(fast, [full[c] for c in codes], atol=1e-5)


class PairingBackend(TinyBackend):
    """A tokenizer that merges "00" into one token (token id of <|unk|>), like BPE tokenizers that
    group digits: codes are then not one token per character."""

    def tokenize(self, text):
        ids = []
        for piece in text.split("00"):
            ids.extend(super().tokenize(piece))
            ids.append(1)
        return ids[:-1]


def test_merging_tokenizer_is_detected_and_scored_per_candidate():
    b = _backend(PairingBackend)
    ctx = b.render(MSGS) + PREFILL
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 2)
    assert TokenCheck(b).code_tokens(ctx, ids, codes) is None
    scores = score_per_candidate(b, ctx, ids, codes)
    # "00" is one token: its score is that single token's log-probability
    state = b.prefix(ids)
    assert abs(scores[0] - float(state.next_logprobs[1])) < 1e-5


class BoundaryBackend(TinyBackend):
    """A tokenizer in which ' 7' is a single token (id of <|unk|>): the context's trailing space
    merges with a candidate's first digit, so the context is no token prefix of context+code."""

    def tokenize(self, text):
        ids = []
        for n, piece in enumerate(text.split(" 7")):
            if n:
                ids.append(1)
            ids.extend(super().tokenize(piece))
        return ids


def test_boundary_merge_scores_the_string_probability_exactly():
    b = _backend(BoundaryBackend)
    ctx = b.render(MSGS) + PREFILL  # ends with a space
    ids = b.tokenize(ctx)
    codes = ["71", "17"]
    assert TokenCheck(b).code_tokens(ctx, ids, codes) is None
    scores = score_per_candidate(b, ctx, ids, codes)

    def seq_logp(seq):
        with torch.no_grad():
            lp = torch.log_softmax(b.logits(torch.tensor([seq]))[0], dim=-1)
        return float(sum(lp[t - 1, seq[t]] for t in range(1, len(seq))))

    # log p(ctx + "71") - log p(ctx), each under the tokenizer's own split
    expect = seq_logp(b.tokenize(ctx + "71")) - seq_logp(ids)
    assert abs(scores[0] - expect) < 1e-4
