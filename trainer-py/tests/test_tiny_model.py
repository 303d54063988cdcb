"""The tiny model's caches reproduce a plain forward pass: incremental decoding (own past) and
candidate paths under a shared prompt prefix."""

import pytest
import torch

from canary_trainer.backends.tiny_model import TinyConfig, TinyGPT
from canary_trainer.backends.tiny_tokenizer import END, CharTokenizer


def _model():
    torch.manual_seed(0)
    m = TinyGPT(TinyConfig(vocab_size=CharTokenizer().vocab_size, n_layer=2, n_head=2, d_model=32, max_len=64))
    return m.eval()


@torch.no_grad()
def test_incremental_decoding_equals_full_forward():
    m = _model()
    idx = torch.randint(6, 100, (1, 20))
    full, _ = m(idx)
    _, past = m(idx[:, :12])
    for t in range(12, 20):
        step, past = m(idx[:, t: t + 1], past=past, pos0=t, last_only=True)
        assert torch.allclose(step[0], full[0, t], atol=1e-5)


@torch.no_grad()
def test_shared_prefix_paths_equal_full_sequences():
    m = _model()
    prompt = torch.randint(6, 100, (1, 15))
    paths = torch.randint(6, 100, (5, 3))
    _, prefix = m(prompt)
    got, own = m(paths, prefix=prefix, pos0=15, last_only=True)
    full, _ = m(torch.cat([prompt.expand(5, 15), paths], dim=1))
    assert torch.allclose(got, full[:, -1], atol=1e-5)
    # one more level: the new token on top of the paths' own cache, still under the prefix
    nxt = torch.randint(6, 100, (5, 1))
    got2, _ = m(nxt, past=own, prefix=prefix, pos0=18, last_only=True)
    full2, _ = m(torch.cat([prompt.expand(5, 15), paths, nxt], dim=1))
    assert torch.allclose(got2, full2[:, -1], atol=1e-5)


def test_tokenizer_one_token_per_character_and_markers():
    tok = CharTokenizer()
    text = tok.render([{"role": "user", "content": "code 0123"}], "4567")
    ids = tok.encode(text)
    assert ids[-1] == END
    digits = [tok.encode(d) for d in "0123456789"]
    assert all(len(d) == 1 for d in digits) and len({d[0] for d in digits}) == 10
    assert tok.decode(tok.encode("a<|end|>b")) == "ab"
    assert tok.encode("é") == [1]  # unknown characters map to <|unk|>
    assert tok.decode(tok.encode("hello\tworld\n")) == "hello\tworld\n"


@torch.no_grad()
def test_rotary_positions_are_relative_and_used_by_the_cache_paths():
    m = _model()
    for block in m.blocks:  # sharpen attention: at init it is nearly uniform, hiding positions
        block.qkv.weight.mul_(20)
    idx = torch.randint(6, 100, (2, 16))
    # RoPE scores depend on offsets only: the same tokens placed later give the same logits...
    at0, _ = m(idx)
    at9, _ = m(idx, pos0=9)
    assert torch.allclose(at0, at9, atol=1e-4)
    # ...while a cached step at the wrong position does not: positions are really applied there.
    _, past = m(idx[:, :10])
    right, _ = m(idx[:, 10:11], past=past, pos0=10, last_only=True)
    wrong, _ = m(idx[:, 10:11], past=past, pos0=13, last_only=True)
    assert torch.allclose(right, at0[:, 10], atol=1e-5)
    assert (right - wrong).abs().max() > 0.05
    assert not any("pos" in name for name in m.state_dict())  # no learned position table


def test_rotary_positions_need_an_even_head_dimension():
    with pytest.raises(ValueError, match="head dimension 5 is odd"):
        TinyGPT(TinyConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, n_head=2, d_model=10, max_len=32))
