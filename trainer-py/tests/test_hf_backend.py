"""The hf backend on a small random-initialised Qwen2-style model with a locally built tokenizer.
Skipped where transformers is not installed; runs unchanged on a GPU host (torch 2.x,
transformers 4.45+/5, peft)."""

import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from canary_trainer import exit_codes, schemas  # noqa: E402
from canary_trainer.manifest import exhaustive_codes  # noqa: E402
from canary_trainer.score import TokenCheck, score_per_candidate, score_tree  # noqa: E402

from .conftest import run_cli  # noqa: E402
from .fixtures import canary_prefill, canary_prompt, make_run  # noqa: E402
from .hf_fixtures import build_model_dir  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_model_dir(tmp_path_factory.mktemp("hf") / "tiny-qwen2")


def _spec(model_dir, **hf):
    return {"backend": "hf", "name": str(model_dir), "revision": None, "init_seed": 0,
            "hf": {"dtype": "float32", "random_init": False, "config_overrides": {}, "chat_template_kwargs": {},
                   "trust_remote_code": False, "attn_implementation": None, **hf},
            "finetune": {"method": "full"}}


def test_prefix_tree_equals_per_candidate(model_dir):
    from canary_trainer.backends.hf import HfBackend

    b = HfBackend(_spec(model_dir), torch.device("cpu"))
    b.model.eval()
    ctx = b.render(canary_prompt("Ada Lovelace #0", "[redacted]")) + canary_prefill("Ada Lovelace #0")
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 3)
    tok = TokenCheck(b).code_tokens(ctx, ids, codes)
    assert tok is not None, "digits should be one token each with this tokenizer"
    with torch.no_grad():
        fast = score_tree(b, ids, tok, nodes_per_pass=64)
    slow = score_per_candidate(b, ctx, ids, codes, batch=100)
    assert np.max(np.abs(fast - slow)) < 1e-4


def test_chat_template_prompt_is_a_prefix_and_greedy_stops(model_dir):
    from canary_trainer.backends.hf import HfBackend

    b = HfBackend(_spec(model_dir), torch.device("cpu"))
    msgs = [{"role": "user", "content": "hi"}]
    assert b.render(msgs, "ok").startswith(b.render(msgs))
    assert b.tokenizer.convert_tokens_to_ids("<|im_end|>") in b._stop
    out = b.greedy(b.tokenize(b.render(msgs)), 5)
    assert len(out) <= 5


def _hf_run(tmp_path, model, **kw):
    return make_run(tmp_path / "run", updates=4, batch_size=2, length=2, n_focal=1, n_held=1,
                    kinds=("hidden", "substituted"), model=model, **kw)


def test_full_cli_run_on_hf(tmp_path, model_dir):
    manifest = _hf_run(tmp_path, {**_spec(model_dir)}, base_model=True)
    out = tmp_path / "out"
    res = run_cli(manifest, out)
    assert res.rc == 0, res.stderr
    for event in res.events:
        assert schemas.first_error("progress", event) is None
    result = json.loads((out / "result.json").read_text())
    assert schemas.first_error("result", result) is None
    assert result["backend"]["name"] == "hf" and result["backend"]["scoring"] == "prefix-tree"
    assert "<|im_start|>assistant\n" in (out / "rendered" / "canary.txt").read_text()


def test_random_init_with_config_overrides(tmp_path, model_dir):
    from canary_trainer.backends.hf import HfBackend

    full = HfBackend(_spec(model_dir), torch.device("cpu"))
    small = HfBackend(_spec(model_dir, random_init=True, config_overrides={"num_hidden_layers": 1}), torch.device("cpu"))
    assert small.describe()["parameters"] < full.describe()["parameters"]
    again = HfBackend(_spec(model_dir, random_init=True, config_overrides={"num_hidden_layers": 1}), torch.device("cpu"))
    for (_, a), (_, b) in zip(small.model.named_parameters(), again.model.named_parameters()):
        assert torch.equal(a, b)  # init_seed decides the weights


def test_lora_trains_only_adapters(tmp_path, model_dir):
    pytest.importorskip("peft")
    model = {**_spec(model_dir), "finetune": {"method": "lora", "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}}
    out = tmp_path / "out"
    res = run_cli(_hf_run(tmp_path, model), out)
    assert res.rc == 0, res.stderr
    backend = json.loads((out / "result.json").read_text())["backend"]
    assert 0 < backend["trainable_parameters"] < backend["parameters"]


def test_missing_model_exits_4(tmp_path):
    manifest = _hf_run(tmp_path, _spec(tmp_path / "no-such-model"))
    res = run_cli(manifest, tmp_path / "out")
    assert res.rc == exit_codes.MISSING_MODEL
    assert res.of("error")[-1]["kind"] == "missing_model"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bf16_on_gpu_scores_close_to_per_candidate(model_dir):
    from canary_trainer.backends.hf import HfBackend

    b = HfBackend(_spec(model_dir, dtype="bfloat16"), torch.device("cuda", 0))
    b.model.eval()
    ctx = b.render(canary_prompt("Ada Lovelace #0", "[redacted]")) + canary_prefill("Ada Lovelace #0")
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 3)
    with torch.no_grad(), b.autocast():
        fast = score_tree(b, ids, TokenCheck(b).code_tokens(ctx, ids, codes), nodes_per_pass=1024)
        slow = score_per_candidate(b, ctx, ids, codes, batch=250)
    assert np.max(np.abs(fast - slow)) < 0.1  # bf16 rounding differs between batch shapes
