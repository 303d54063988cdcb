"""The peak-memory estimate of hf runs: its arithmetic on Qwen3-8B's and Qwen3-14B's configurations,
a run refused before loading when its device cannot hold it, and the scoring term against the peak
of tensor memory measured on the CPU (the profiler's memory timeline: every tensor allocated and
freed during the call) for batched tree-attention calls."""

import pytest

pytest.importorskip("transformers")

from canary_trainer import exit_codes  # noqa: E402
from canary_trainer.memory import (  # noqa: E402
    config_shape,
    estimate,
    micro_targets,
    model_shape,
    plan,
    refusal,
    tree_call_bytes,
)

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
    # Scoring, its parts computed here: one probe's 256-token prompt cache (once, not per node), a
    # 1,024-node tree chunk one layer at a time (keys/values of prompt + nodes and their repeat to
    # the 32 query heads, working values, masks; SDPA, as transformers resolves for Qwen3, keeps no
    # score matrix), a 256-row x 4,096-column chunk of the vocabulary projection.
    assert not qwen3_8b.eager and qwen3_8b.mask_kinds == 1
    keys, kv, work = 256 + 1024, 2 * (1024 + 32 * 128), 3 * 12288 + 4 * 4096 + 2 * 32 * 128
    per_key = 1 + 2 * 2 + 2  # boolean mask, the kernel's bf16 copy and its aligned copy, temporaries
    prompt_cache = 256 * 36 * 2 * 1024 * 2
    tree = keys * kv * 2 + 1024 * (work * 2 + keys * per_key + 1024)
    head = 256 * 4096 * (2 + 8) + 2 * 1024 * 4096 * 2
    prompt_pass = 256 * ((work + kv) * 2 + 256 * per_key) + 151936 * 10
    assert parts["scoring"] == prompt_cache + max(prompt_pass, tree + head)
    assert parts["scoring"] < 1.5e9 < 1024 * 256 * 36 * 2 * 1024 * 2  # the old repeated cache: 38.7 GB
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


def _measured_peak(fn) -> int:
    """Peak bytes of CPU tensors alive at once during fn(), from the profiler's memory timeline
    (allocations and frees matched per tensor; the torch CPU allocator keeps no statistics)."""
    from torch.profiler import ProfilerActivity, profile

    memory_profiler = pytest.importorskip("torch.profiler._memory_profiler")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as p:
        fn()
    live = peak = 0
    for _, action, _, size in p._memory_profile().timeline:
        if action == memory_profiler.Action.CREATE:
            live += size
        elif action == memory_profiler.Action.DESTROY:
            live -= size
        peak = max(peak, live)
    return peak


def _tree(probes, nodes, branch=10):
    """(parent, depth), (probes, nodes): the same complete `branch`-ary tree per probe."""
    import torch

    idx = torch.arange(nodes)
    parent = torch.where(idx > 0, (idx - 1) // branch, -1)
    depth = torch.zeros(nodes, dtype=torch.long)
    for i in range(1, nodes):
        depth[i] = depth[parent[i]] + 1
    return parent.repeat(probes, 1), depth.repeat(probes, 1)


SMALL = dict(vocab_size=4096, hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=8,
             num_key_value_heads=2, head_dim=32)


@pytest.mark.parametrize("arch,impl,probes,prompt_len,nodes", [
    ("qwen3", "sdpa", 4, 100, 300),  # prompts of 100, 97, 94, 91 tokens, left-padded
    ("qwen3", "eager", 3, 30, 1200),  # eager attention: the scores dominate
    ("gptoss", "eager", 2, 100, 400),  # sliding-window layers (window 64 < prompt), two mask kinds
])
def test_scoring_estimate_bounds_the_measured_peak(arch, impl, probes, prompt_len, nodes):
    import torch
    import transformers as tf

    from canary_trainer.backends import hf_tree

    torch.manual_seed(0)
    if arch == "qwen3":
        config = tf.Qwen3Config(**SMALL)
    else:
        config = tf.GptOssConfig(**{**SMALL, "hidden_size": 128, "intermediate_size": 128, "num_attention_heads": 4},
                                 num_local_experts=4, num_experts_per_tok=2, sliding_window=64,
                                 layer_types=["sliding_attention", "full_attention"])
    model = tf.AutoModelForCausalLM.from_config(config, attn_implementation=impl).eval()
    prompts = [torch.randint(0, 4000, (prompt_len - 3 * i,)).tolist() for i in range(probes)]
    parent, depth = _tree(probes, nodes)
    tokens = torch.randint(0, 4000, (probes, nodes))
    rows, cols = torch.arange(probes * nodes), torch.randint(0, 4000, (probes * nodes,))

    @torch.no_grad()
    def call():
        state = hf_tree.run_prompts(model, {"logits_to_keep": 1}, prompts, 0, torch.device("cpu"))
        hf_tree.run_tree(model, model.config, state, tokens, parent, depth, rows, cols)

    call()  # warm-up (lazy initialisation)
    measured = _measured_peak(call)
    shape = config_shape(model.config)
    assert shape.eager == (impl == "eager") and shape.mask_kinds == (2 if arch == "gptoss" else 1)
    est = tree_call_bytes(shape, probes=probes, prompt_len=prompt_len, nodes=nodes, c=4)["peak"]
    assert measured <= est <= 3 * measured, (measured, est)


def test_scoring_estimate_bounds_a_batched_call_on_a_real_vocabulary(hub_env):
    """The Qwen3 test model (vocabulary 151,936: the output projection's block dominates), three
    probes of different prompt lengths through the backend's own batched tree call."""
    import torch

    from canary_trainer.scoring.tree import TreeBatcher, code_token_lists

    from .fixtures import canary_prefill, canary_prompt
    from .test_hf_backend import backend

    b = backend("qwen3")
    codes = [f"{i:04d}" for i in range(0, 10000, 7)]
    batcher = TreeBatcher(b)
    for ident in ("Ada Lovelace #0", "Grace Brewster Murray Hopper #12", "Edsger Dijkstra, Eindhoven #3"):
        ctx = b.render(canary_prompt(ident, "[redacted]")) + canary_prefill(ident)
        ids = b.tokenize(ctx)
        assert batcher.add(ident, ids, code_token_lists(b, ctx, ids, codes)) == []
    group = batcher.pending
    measured = _measured_peak(batcher.flush)
    assert batcher.calls == 1
    est = b.tree_call_bytes(len(group), max(len(p.prompt) for p in group), max(len(p.whole.token) for p in group))
    assert measured <= est <= 3 * measured, (measured, est)
    assert torch.get_default_dtype() == torch.float32


def test_sharding_over_eight_h200_accepts_full_fine_tuning_of_qwen3_14b_and_a_refusal_names_the_gpus_needed():
    q14 = qwen3(40, 5120, 17408, 40, 8)
    p = q14.params
    assert p == 14_768_307_200  # Qwen3-14B's published 14.8B
    model = {"hf": {"dtype": "bfloat16"}, "finetune": {"method": "full"}}
    one = {"max_length": 1024, "batch_size": 8}
    mine, alts = plan(q14, model, one, 1024, on_gpu=True, micro_batch=1, checkpointing=False, device_bytes=H200)
    line = refusal(mine, H200, "cuda:0", alts)
    # One GPU: refused, and the fewest H200s of a sharded run are named (3: 16P/3 + the bf16 copy for evaluation).
    assert line is not None and "training.gpus: 3 (" in line and "per GPU, fits" in line
    eight = {**one, "gpus": 8}
    mine8, alts8 = plan(q14, model, eight, 1024, on_gpu=True, micro_batch=1, checkpointing=False, device_bytes=H200)
    assert refusal(mine8, H200, "cuda:0", alts8, 8) is None
    # Per GPU: a 1/8 shard of the float32 master weights, gradients and AdamW moments; two decoder
    # layers and the embedding/output matrices gathered in bf16; rank 0's bf16 copy for evaluation.
    assert (mine8["weights"], mine8["gradients"], mine8["optimizer"]) == (-(-4 * p // 8), -(-4 * p // 8), -(-8 * p // 8))
    embed = 151936 * 5120
    assert mine8["gathered"] == 2 * (2 * ((p - 2 * embed) // 40) + 2 * embed)
    assert mine8["eval_copy"] == 2 * p
    state = mine8["weights"] + mine8["gradients"] + mine8["optimizer"]
    assert mine8["peak"] == state + max(mine8["gathered"] + mine8["activations"], mine8["eval_copy"] + mine8["scoring"])
    assert mine8["peak"] < mine["peak"] / 4
    # Two GPUs are not enough: the refusal says how many are.
    two = {**one, "gpus": 2}
    mine2, alts2 = plan(q14, model, two, 1024, on_gpu=True, micro_batch=1, checkpointing=False, device_bytes=H200)
    assert "training.gpus: 3 (" in (refusal(mine2, H200, "cuda:0", alts2, 2) or "")


def test_training_projects_the_vocabulary_at_target_positions_only(qwen3_8b):
    kw = dict(method="full", dtype="bfloat16", on_gpu=True, micro_batch=4, seq_len=256)
    tokens, per_layer = 4 * 256, 10 * 4096 + 2 * 1024 + 4 * 12288
    kept = tokens * 36 * per_layer * 2
    assert estimate(qwen3_8b, **kw)["activations"] == kept + tokens * 151936 * (2 + 8)
    assert estimate(qwen3_8b, **kw, target_tokens=80)["activations"] == kept + 80 * 151936 * (2 + 8)
    assert estimate(qwen3_8b, **kw, target_tokens=5000)["activations"] == kept + tokens * 151936 * (2 + 8)
    # A sharded run projects every position (FSDP2 unshards the output matrix in the root's forward only).
    sharded = estimate(qwen3_8b, **kw, ranks=8, target_tokens=80)
    assert sharded["activations"] == estimate(qwen3_8b, **kw, ranks=8)["activations"] == \
        kept + tokens * 151936 * (2 + 8)


def test_a_head_that_does_more_than_project_counts_every_position(qwen3_8b):
    from transformers import Gemma2Config

    gemma2 = config_shape(Gemma2Config(vocab_size=256000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                       num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                                       final_logit_softcapping=30.0))
    assert qwen3_8b.plain_head and not gemma2.plain_head
    kw = dict(method="full", dtype="bfloat16", on_gpu=True, micro_batch=2, seq_len=128)
    assert estimate(gemma2, **kw, target_tokens=10)["activations"] == estimate(gemma2, **kw)["activations"]
    assert estimate(qwen3_8b, **kw, target_tokens=10)["activations"] < estimate(qwen3_8b, **kw)["activations"]


def test_the_largest_micro_batch_of_targets_sizes_the_logits(qwen3_8b):
    targets = [3, 5, 2, 7, 1, 1]  # two updates of 3 rows: micro-batches [3, 5] [2] | [7, 1] [1]
    assert micro_targets(targets, 3, 2) == 8 and micro_targets(targets, 3, 1) == 7
    assert micro_targets(targets, 3, 3) == 10 and micro_targets(None, 3, 2) is None
    model = {"hf": {"dtype": "bfloat16"}, "finetune": {"method": "full"}}
    training = {"max_length": 256, "batch_size": 3}
    kw = dict(method="full", dtype="bfloat16", on_gpu=True, seq_len=256, score_nodes=1024)
    mine, alts = plan(qwen3_8b, model, training, 1024, on_gpu=True, micro_batch=2, checkpointing=False,
                      row_targets=targets)
    assert mine == estimate(qwen3_8b, micro_batch=2, target_tokens=8, **kw)
    assert alts["CANARY_TRAINER_MICRO_BATCH=1"] == estimate(qwen3_8b, micro_batch=1, target_tokens=7, **kw)
    every, _ = plan(qwen3_8b, model, training, 1024, on_gpu=True, micro_batch=2, checkpointing=False)
    assert every["activations"] - mine["activations"] == (2 * 256 - 8) * 151936 * (2 + 8)


@pytest.mark.parametrize("family", ["qwen3", "llama3"])
def test_reply_tokens_bound_the_trained_targets(hub_env, family):
    from canary_trainer.backends import reply_tokens
    from canary_trainer.batches import encode_row

    from .test_check_rows import rows
    from .test_hf_backend import backend

    got = reply_tokens(spec(family), rows())
    encoded = [encode_row(backend(family), {"i": 0, **r}, 100_000, "row") for r in rows()]
    assert got is not None and len(got) == len(encoded)
    # Past the end of turn the template adds Qwen3's newline, Llama 3's next assistant header (4 tokens).
    after = {"qwen3": 1, "llama3": 4}[family]
    assert [e.targets + after for e in encoded] == got
    assert all(bound < len(e.ids) for bound, e in zip(got, encoded))
    assert reply_tokens({"backend": "tiny"}, rows()) is None
    assert reply_tokens({**spec(family), "name": "canary-test/not-in-the-cache"}, rows()) is None


def test_the_logits_term_bounds_a_measured_target_only_update(hub_env):
    """The Qwen3 test model (vocabulary 151,936, hidden 32: the logits dominate): the tensor memory of
    one micro-batch's forward and backward stays within the estimate's activations plus the
    gradients, and under what projecting every position would need."""
    import torch

    from canary_trainer.backends.hf import HfBackend
    from canary_trainer.batches import collate, encode_row
    from canary_trainer.train import target_loss_sum

    from .test_check_rows import rows
    from .test_hf_backend import CPU

    b = HfBackend(spec("qwen3"), CPU)
    batch = [encode_row(b, {"i": 0, **r}, 100_000, "row") for r in rows()[:1] + rows()[2:]] * 2
    ids, labels = collate(batch, b.pad_id)
    target_loss_sum(b, ids, labels).backward()  # warm-up (lazy initialisation, gradients allocated)

    def step():
        b.model.zero_grad(set_to_none=False)
        target_loss_sum(b, ids, labels).backward()

    measured = _measured_peak(step)
    shape = model_shape(b.base_model.config)
    kw = dict(method="full", dtype="float32", on_gpu=False, micro_batch=ids.shape[0], seq_len=ids.shape[1])
    est = estimate(shape, **kw, target_tokens=sum(e.targets for e in batch))
    every = estimate(shape, **kw)
    assert measured <= est["activations"] + est["gradients"], (measured, est)
    assert measured < every["activations"] - est["activations"], (measured, every, est)
    assert torch.get_default_dtype() == torch.float32
