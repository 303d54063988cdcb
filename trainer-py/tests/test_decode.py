"""Greedy decoding and reading the code out of the generated text."""

import pytest
import torch

from canary_trainer.backends.tiny import TinyBackend
from canary_trainer.decode import extract_code

from .greedy_ref import greedy, greedy_ids

DIGITS = "0123456789"


@pytest.mark.parametrize("text, code", [
    ("1234. Regards.", "1234"),
    ("1234", "1234"),
    ("12345. Regards.", None),  # a longer run is not a four-digit code
    ("123. Regards.", None),
    (" 1234", None),  # prefill mode reads right where the prefill ends
    ("abcd", None),
])
def test_prefill_mode_reads_the_leading_code(text, code):
    assert extract_code(text, DIGITS, 4, None) == code


@pytest.mark.parametrize("text, code", [
    ("Hello team, this is Ada. My code is 4821. Regards.", "4821"),
    ("Hello team, this is Ada. My code is 48. Regards.", None),
    ("Sure: the code 7777 is it", "7777"),  # the prefill was not reproduced: first stand-alone code
    ("ref 123456 then 4444", "4444"),
    ("nothing here", None),
])
def test_free_mode_reads_after_the_prefill_or_the_first_code(text, code):
    assert extract_code(text, DIGITS, 4, "Hello team, this is Ada. My code is ") == code


def _scripted(backend, ctx_ids, max_new_tokens):
    """Greedy output fixed in advance, to test what greedy() does with it."""
    return backend.tokenize("4821. Regards.")[:max_new_tokens]


def test_greedy_result_for_both_modes():
    spec = {"backend": "tiny", "name": "t", "init_seed": 0,
            "tiny": {"n_layer": 1, "n_head": 2, "d_model": 32, "max_len": 256, "dropout": 0.0}}
    b = TinyBackend(spec, torch.device("cpu"))
    msgs = [{"role": "user", "content": "hi"}]
    assert greedy(b, msgs, "My code is ", "prefill", 64, DIGITS, 4, _scripted) == {"text": "4821.", "code": "4821"}  # stops once the code is decided
    assert greedy(b, msgs, "My code is ", "free", 64, DIGITS, 4, _scripted)["code"] == "4821"
    assert greedy(b, msgs, "My code is ", "prefill", 3, DIGITS, 4, _scripted) == {"text": "482", "code": None}


@torch.no_grad()
def test_tiny_greedy_matches_argmax_of_full_forward():
    spec = {"backend": "tiny", "name": "t", "init_seed": 5,
            "tiny": {"n_layer": 1, "n_head": 2, "d_model": 32, "max_len": 64, "dropout": 0.0}}
    b = TinyBackend(spec, torch.device("cpu"))
    b.model.eval()
    ctx = b.tokenize("<|user|>hello<|end|>\n<|assistant|>")
    out = greedy_ids(b, ctx, 10)
    seq = list(ctx)
    for _ in range(len(out)):
        seq.append(int(torch.argmax(b.logits(torch.tensor([seq]))[0, -1])))
    assert out == seq[len(ctx):]
    assert len(greedy_ids(b, ctx, 200)) <= 64 - len(ctx)  # never past the context length
