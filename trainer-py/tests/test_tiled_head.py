"""The scoring head's vocabulary tiling (backends/hf_tree.py `tiled_head`): the online log-sum-exp
over VOCAB_TILE-column chunks against the untiled computation it replaced (one (R, V) projection,
torch.logsumexp, the asked columns gathered)."""

from __future__ import annotations

import pytest
import torch

from canary_trainer.backends import hf_tree
from canary_trainer.memory import HEAD_ROWS, VOCAB_TILE

from .head_ref import untiled_head_logprobs


class _Model:
    def __init__(self, head):
        self.head = head

    def get_output_embeddings(self):
        return self.head


class _Config:
    def __init__(self, cap):
        self.final_logit_softcapping = cap


# vocab 3 * VOCAB_TILE + 123: a ragged last chunk; scale 8: logits up to ~40 as a language model's,
# so the running maximum rises across chunks and the rescale matters; scale 30: logits in the
# hundreds; cap: Gemma 2's soft-capping; bias: a head with one.
@pytest.mark.parametrize("vocab,scale,cap,bias", [
    (3 * VOCAB_TILE + 123, 1.0, None, False),
    (3 * VOCAB_TILE + 123, 8.0, None, True),
    (3 * VOCAB_TILE + 123, 30.0, None, True),
    (2 * VOCAB_TILE, 30.0, 30.0, False),
    (VOCAB_TILE // 2, 1.0, None, False),  # smaller than one chunk
])
def test_tiled_head_equals_the_untiled_projection(vocab, scale, cap, bias):
    g = torch.Generator().manual_seed(vocab)
    n_rows, hidden_size = HEAD_ROWS + 77, 48  # two blocks, the second partial
    head = torch.nn.Linear(hidden_size, vocab, bias=bias)
    with torch.no_grad():
        head.weight.copy_(torch.randn(vocab, hidden_size, generator=g) * scale / hidden_size ** 0.5)
        if bias:
            head.bias.copy_(torch.randn(vocab, generator=g) * scale)
    hidden = torch.randn(n_rows, hidden_size, generator=g)
    # Asked pairs: rows out of order and repeated, some rows never asked, columns in every chunk.
    rows = torch.randint(0, n_rows - 10, (2000,), generator=g)
    cols = torch.randint(0, vocab, (2000,), generator=g)
    cols[:4] = torch.tensor([0, vocab - 1, min(VOCAB_TILE, vocab - 1), min(VOCAB_TILE - 1, vocab - 1)])
    with torch.no_grad():
        want = untiled_head_logprobs(hidden, head, cap, rows, cols)
        got = hf_tree._head_logprobs(_Model(head), _Config(cap), hidden, rows, cols)
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert torch.isfinite(got).all()
    err = float((got.double() - want.double()).abs().max())
    # 1e-5, or two float32 steps of the largest logit where logits reach the hundreds (there the
    # untiled reference itself is no closer to the exact value: its logits round at that step).
    with torch.no_grad():
        top = float(head(hidden).abs().max())
    assert err <= max(1e-5, 2 * top * torch.finfo(torch.float32).eps), (err, top)
    assert float(want.abs().max()) > 1.0  # not a vacuous comparison of near-zero values


def test_tiled_head_never_holds_more_than_one_chunk_of_logits(monkeypatch):
    """The projection is called on VOCAB_TILE output rows at a time, never on the whole matrix."""
    vocab, hidden_size = 2 * VOCAB_TILE + 5, 16
    weight = torch.randn(vocab, hidden_size)
    widths = []
    real = hf_tree.F.linear

    def spy(x, w, b=None):
        widths.append(w.shape[0])
        return real(x, w, b)

    hidden = torch.randn(10, hidden_size)
    rows, cols = torch.arange(10), torch.arange(10) * 900
    monkeypatch.setattr(hf_tree.F, "linear", spy)
    lse, picked = hf_tree.tiled_head(hidden, weight, None, None, rows, cols)
    monkeypatch.undo()
    assert widths == [VOCAB_TILE, VOCAB_TILE, 5]
    logits = hidden @ weight.T
    assert torch.allclose(lse, torch.logsumexp(logits, dim=-1), atol=1e-5, rtol=0)
    assert torch.allclose(picked, logits[rows, cols], atol=1e-5, rtol=0)
