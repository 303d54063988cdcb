"""The peak-memory estimate of hf runs: its arithmetic on Qwen3-8B's and Qwen3-14B's configurations,
and a run refused before loading when its device cannot hold it."""

import pytest

pytest.importorskip("transformers")

from canary_trainer import exit_codes  # noqa: E402
from canary_trainer.memory import estimate, model_shape, plan, refusal  # noqa: E402

from .conftest import run_cli, trainer_env  # noqa: E402
from .fixtures import make_run  # noqa: E402
from .hf_fixtures import hub_env  # noqa: E402,F401  (fixture)
from .test_hf_backend import spec  # noqa: E402

H200 = 141 * 10 ** 9  # bytes (about 131 GiB)


def qwen3(layers, hidden, intermediate, heads, kv):
    from transformers import Qwen3Config

    return model_shape(Qwen3Config(vocab_size=151936, hidden_size=hidden, intermediate_size=intermediate,
                                   num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
                                   head_dim=128, tie_word_embeddings=False))


@pytest.fixture(scope="module")
def qwen3_8b():
    return qwen3(36, 4096, 12288, 32, 8)


def test_parameter_count_and_lora_targets_of_qwen3_8b(qwen3_8b):
    assert qwen3_8b.params == 8_190_735_360  # Qwen3-8B's published 8.2B
    # q_proj 4096 -> 4096, v_proj 4096 -> 1024, in each of 36 layers.
    assert qwen3_8b.lora_io == 36 * ((4096 + 4096) + (4096 + 1024))
    assert (qwen3_8b.kv_dim, qwen3_8b.mlp_width, qwen3_8b.vocab) == (1024, 12288, 151936)


def test_full_fine_tuning_costs_16_bytes_per_parameter_plus_the_autocast_copy(qwen3_8b):
    p = qwen3_8b.params
    parts = estimate(qwen3_8b, method="full", dtype="bfloat16", on_gpu=True, micro_batch=4, seq_len=256,
                     score_nodes=1024)
    assert parts["weights"] + parts["gradients"] + parts["optimizer"] == 16 * p + 2 * p
    assert (parts["gradients"], parts["optimizer"]) == (4 * p, 8 * p)
    assert 16 * p / 1e9 == pytest.approx(131.05, abs=0.01)  # ~131 GB before activations
    tokens = 4 * 256
    per_layer = 10 * 4096 + 2 * 1024 + 4 * 12288
    assert parts["activations"] == tokens * 36 * per_layer * 2 + tokens * 151936 * (2 + 8)
    assert parts["scoring"] == 1024 * 256 * 36 * 2 * 1024 * 2 + 1024 * 151936 * 8
    assert parts["peak"] == 18 * p + max(parts["activations"], parts["scoring"])
    # float32 on the GPU: no autocast copy.
    fp32 = estimate(qwen3_8b, method="full", dtype="float32", on_gpu=True, micro_batch=4, seq_len=256)
    assert fp32["weights"] == 4 * p


def test_lora_keeps_a_half_precision_base_and_float32_adapters(qwen3_8b):
    p, a = qwen3_8b.params, 16 * qwen3_8b.lora_io
    parts = estimate(qwen3_8b, method="lora", dtype="bfloat16", on_gpu=True, micro_batch=4, seq_len=256, lora_r=16)
    assert parts["trainable"] == a
    assert (parts["weights"], parts["gradients"], parts["optimizer"]) == (2 * p + 4 * a, 4 * a, 8 * a)
    full = estimate(qwen3_8b, method="full", dtype="bfloat16", on_gpu=True, micro_batch=4, seq_len=256)
    assert parts["peak"] < full["peak"] / 3


def test_checkpointing_and_micro_batches_shrink_activations(qwen3_8b):
    kw = dict(method="lora", dtype="bfloat16", on_gpu=True, seq_len=1024)
    base = estimate(qwen3_8b, micro_batch=8, **kw)["activations"]
    assert estimate(qwen3_8b, micro_batch=8, checkpointing=True, **kw)["activations"] < base / 3
    assert estimate(qwen3_8b, micro_batch=1, **kw)["activations"] * 8 == base


def test_full_qwen3_8b_and_14b_are_refused_on_one_h200_with_alternatives(qwen3_8b):
    model = {"hf": {"dtype": "bfloat16"}, "finetune": {"method": "full"}}
    training = {"max_length": 256, "batch_size": 8}
    for shape in (qwen3_8b, qwen3(40, 5120, 17408, 40, 8)):  # Qwen3-14B: 14.8B parameters, ~237 GB
        mine, alts = plan(shape, model, training, 1024, on_gpu=True, micro_batch=8, checkpointing=False)
        line = refusal(mine, H200, "cuda:0", alts)
        assert line is not None and "\n" not in line
        assert "model.finetune.method lora r=16" in line and "fits" in line
        assert "CANARY_TRAINER_GRADIENT_CHECKPOINTING=1" in line and "CANARY_TRAINER_MICRO_BATCH=1" in line
    lora = {"hf": {"dtype": "bfloat16"}, "finetune": {"method": "lora", "r": 16}}
    mine, alts = plan(qwen3_8b, lora, training, 1024, on_gpu=True, micro_batch=8, checkpointing=False)
    assert refusal(mine, H200, "cuda:0", alts) is None


def test_a_run_its_device_cannot_hold_is_refused_before_loading(hub_env, tmp_path):
    manifest = make_run(tmp_path / "run", updates=2, batch_size=2, length=2, n_focal=1, n_held=1, kinds=("hidden",),
                        model=spec("qwen3"))
    res = run_cli(manifest, tmp_path / "out", env=trainer_env(CANARY_TRAINER_DEVICE_MEMORY_GB="0.01"))
    assert res.rc == exit_codes.OOM, res.stderr
    error = res.of("error")[-1]
    assert error["kind"] == "oom" and not error["recoverable"]
    assert "exceeds the 0.0 GiB usable" in error["message"] and "model.finetune.method lora" in error["message"]
    assert not res.of("started")  # refused before loading the model or training
