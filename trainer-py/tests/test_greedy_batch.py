"""Batched greedy decoding across probes equals one-at-a-time greedy with the same early stop
(tiny and hf), and the stop rule ends a row exactly when its code can no longer change."""

import pytest
import torch

from canary_trainer.backends.tiny import TinyBackend
from canary_trainer.decode import decided, extract_code, greedy_many

from .fixtures import canary_prefill, canary_prompt
from .greedy_ref import greedy
from .hf_fixtures import hub_env  # noqa: F401  (fixture)

DIGITS = "0123456789"
PRE = "Hello team, this is Ada. My code is "


@pytest.mark.parametrize("text,done", [
    ("482", False), ("4821", False), ("4821.", True), ("48213", True), ("x", True), ("", False)])
def test_prefill_mode_is_decided_once_the_run_is_closed_or_too_long(text, done):
    assert decided(text, DIGITS, 4, None) is done


@pytest.mark.parametrize("text,done", [
    ("Hello team", False), (PRE + "4821", False), (PRE + "4821 ", True), ("Sure: 4821", False),
    ("Sure: 4821.", True), ("Sure: 12 and", False), ("Hi 4821 x", True)])
def test_free_mode_is_decided_once_a_closed_code_appeared(text, done):
    assert decided(text, DIGITS, 4, PRE) is done
    if done:  # nothing appended changes the answer
        assert extract_code(text + "9999 x", DIGITS, 4, PRE) == extract_code(text, DIGITS, 4, PRE)


def _probes():
    names = ["Ada Lovelace #0", "Alan Turing #1", "Grace Hopper #12", "Ken Thompson #3", "Tony Hoare #4"]
    return [{"prompt": canary_prompt(n, "[redacted]"), "prefill": canary_prefill(n), "decode": ["prefill", "free"]}
            for n in names]


def _same_as_sequential(b, max_new_tokens):
    probes = _probes()
    with torch.no_grad():
        batched = greedy_many(b, probes, max_new_tokens, DIGITS, 4)
        for p, got in zip(probes, batched):
            for mode in p["decode"]:
                one = greedy(b, p["prompt"], p["prefill"], mode, max_new_tokens, DIGITS, 4)
                assert got[mode] == one, (mode, got[mode], one)
    return batched


def test_tiny_batched_greedy_equals_sequential():
    spec = {"backend": "tiny", "name": "t", "init_seed": 5,
            "tiny": {"n_layer": 2, "n_head": 2, "d_model": 32, "max_len": 256, "dropout": 0.0}}
    b = TinyBackend(spec, torch.device("cpu"))
    b.model.eval()
    _same_as_sequential(b, 20)


@pytest.mark.parametrize("family", ["qwen3", "llama3", "gptoss"])
def test_hf_batched_greedy_equals_sequential(hub_env, family):
    pytest.importorskip("transformers")
    from .test_hf_backend import backend

    b = backend(family)
    b.mem_bytes = 1 << 26  # several batches
    try:
        _same_as_sequential(b, 12)
    finally:
        b.mem_bytes = None
