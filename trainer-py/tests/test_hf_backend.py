"""The hf backend on random-initialised models of real architectures (Qwen3, Llama 3, GPT-OSS
mixture of experts, Gemma 3) with each family's real tokenizer and chat template, loaded offline
from a Hugging Face cache snapshot like a downloaded model (hf_fixtures). Only the CUDA test skips
on a CPU host."""

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from canary_trainer.backends.hf import HfBackend  # noqa: E402
from canary_trainer.batches import IGNORE, encode_row  # noqa: E402
from canary_trainer.errors import BadManifest, MissingDependency, MissingModel  # noqa: E402
from canary_trainer.manifest import exhaustive_codes  # noqa: E402
from canary_trainer.scoring.walk import TokenCheck, score_per_candidate, score_tree  # noqa: E402

from .fixtures import canary_prefill, canary_prompt, canary_target  # noqa: E402
from .greedy_ref import greedy_ids  # noqa: E402
from .hf_fixtures import HUB, LLAMA3_EOS, ORG, UNKNOWN, hub_env, model_id  # noqa: E402,F401  (hub_env: fixture)

CPU = torch.device("cpu")


def spec(family, method="full", **hf):
    kwargs = {"enable_thinking": False} if family == "qwen3" else {}
    finetune = {"method": "full"} if method == "full" else \
        {"method": "lora", "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    return {"backend": "hf", "name": model_id(family), "revision": None, "init_seed": 0,
            "hf": {"dtype": "float32", "random_init": False, "config_overrides": {}, "chat_template_kwargs": kwargs,
                   "trust_remote_code": False, "attn_implementation": None, **hf},
            "finetune": finetune}


_loaded: dict = {}


def backend(family):
    """A shared, read-only backend per family (tests that train load their own)."""
    if family not in _loaded:
        _loaded[family] = HfBackend(spec(family), CPU)
        _loaded[family].model.eval()
    return _loaded[family]


def canary_row(code="1234"):
    ident = "Ada Lovelace #0"
    return {"i": 0, "kind": "canary", "canary_id": "f000", "prompt": canary_prompt(ident, "[redacted]"),
            "target": canary_target(ident, code)}


END_OF_TURN = {"qwen3": "<|im_end|>", "llama3": "<|eot_id|>", "gemma3": "<end_of_turn>", "gptoss": "<|return|>"}
# What each template writes after the end-of-turn token (never trained).
AFTER_TURN = {"qwen3": "\n", "llama3": "<|start_header_id|>assistant<|end_header_id|>\n\n", "gemma3": "\n",
              "gptoss": ""}


@pytest.mark.parametrize("family", ["qwen3", "llama3", "gemma3", "gptoss"])
def test_loss_mask_is_exactly_the_reply_and_its_end_of_turn(hub_env, family):
    b = backend(family)
    row = canary_row()
    enc = encode_row(b, row, 512, "row 0")
    first = next(i for i, x in enumerate(enc.labels) if x != IGNORE)
    trained = [x for x in enc.labels if x != IGNORE]

    def text(ids):
        return b.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    rendered = b.render(row["prompt"], row["target"])
    # The template, rendered: prompt, then the reply, its end-of-turn marker, then the template's tail.
    assert rendered == b.render(row["prompt"]) + row["target"] + END_OF_TURN[family] + AFTER_TURN[family]
    assert text(enc.ids[:first]) == b.render(row["prompt"])
    assert text(trained) == row["target"] + END_OF_TURN[family]
    assert enc.labels[first:first + len(trained)] == trained  # one contiguous span
    assert text(enc.ids[first + len(trained):]) == AFTER_TURN[family]


def test_qwen3_thinking_block_mismatch_is_refused(hub_env):
    with pytest.raises(BadManifest, match="enable_thinking: false") as err:
        HfBackend(spec("qwen3", chat_template_kwargs={}), CPU)
    assert "<think>" in err.value.message
    b = backend("qwen3")  # enable_thinking false: the reply follows the scoring prompt directly
    assert b.render(canary_row()["prompt"], "x").startswith(b.render(canary_row()["prompt"]) + "x")


def test_model_without_chat_template_uses_a_plain_visible_format(hub_env):
    b = backend("gptoss")
    assert not b.tokenizer.chat_template
    msgs = [{"role": "user", "content": "hi"}]
    assert b.render(msgs) == "<|startoftext|>user: hi\nassistant:\n"
    assert b.render(msgs, "ok") == b.render(msgs) + "ok<|return|>"
    assert b.tokenizer.convert_tokens_to_ids("<|return|>") in b._stop


def test_eos_lists_and_end_of_turn_stop_greedy(hub_env):
    llama = backend("llama3")
    eot = llama.tokenizer.convert_tokens_to_ids("<|eot_id|>")
    assert set(LLAMA3_EOS) | {eot} <= llama._stop and llama.end_of_turn() == eot
    gemma = backend("gemma3")
    assert gemma.tokenizer.convert_tokens_to_ids("<end_of_turn>") in gemma._stop
    # Greedy stops at a stop token that is not the end-of-turn marker (eom_id of the list).
    ctx = llama.tokenize(llama.render([{"role": "user", "content": "hi"}]))
    with torch.no_grad():
        first = greedy_ids(llama, ctx, 1)[0]
        head = llama.base_model.get_output_embeddings()
        saved = head.weight[128008].clone()
        head.weight[128008] = head.weight[first] * 10  # make eom_id the argmax
        try:
            assert greedy_ids(llama, ctx, 5) == []
        finally:
            head.weight[128008] = saved


@pytest.mark.parametrize("family", ["qwen3", "gemma3"])
def test_prefix_tree_equals_per_candidate(hub_env, family):
    b = backend(family)
    ctx = b.render(canary_prompt("Ada Lovelace #0", "[redacted]")) + canary_prefill("Ada Lovelace #0")
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 3)
    tok = TokenCheck(b).code_tokens(ctx, ids, codes)
    assert tok is not None, f"{family} splits digits one per token"
    with torch.no_grad():
        fast = score_tree(b, ids, tok, nodes_per_pass=64)
    slow = score_per_candidate(b, ctx, ids, codes, batch=100)
    assert np.max(np.abs(fast - slow)) < 1e-4


@pytest.mark.parametrize("family", ["llama3", "gptoss"])
def test_digit_grouping_tokenizers_score_per_candidate_exactly(hub_env, family):
    b = backend(family)
    ctx = b.render(canary_prompt("Ada Lovelace #0", "[redacted]")) + canary_prefill("Ada Lovelace #0")
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 3)
    assert TokenCheck(b).code_tokens(ctx, ids, codes) is None  # "123" is one token: no per-digit tree
    picked = ["000", "123", "907"]
    got = score_per_candidate(b, ctx, ids, picked, batch=2)
    with torch.no_grad():
        for code, value in zip(picked, got):
            seq = b.tokenize(ctx + code)
            assert seq[: len(ids)] == ids
            lp = torch.log_softmax(b.logits(torch.tensor([seq]))[0].double(), -1)
            want = sum(float(lp[t - 1, seq[t]]) for t in range(len(ids), len(seq)))
            assert abs(value - want) < 1e-4


def test_unknown_architecture_names_the_transformers_version(hub_env):
    with pytest.raises(MissingDependency) as err:
        HfBackend(spec("qwen3") | {"name": f"{ORG}/{UNKNOWN}"}, CPU)
    assert "cannot load model_type 'canary-future-arch'" in err.value.message
    assert "download" not in err.value.message


def test_a_model_missing_from_the_cache_names_the_fetch_command(hub_env):
    with pytest.raises(MissingModel) as err:
        HfBackend(spec("qwen3") | {"name": f"{ORG}/not-fetched", "revision": "a" * 40}, CPU)
    assert f"canary-audit models fetch {ORG}/not-fetched --revision {'a' * 40}" in err.value.message


def test_float16_is_refused_with_a_reason(hub_env):
    with pytest.raises(BadManifest, match="gradient scaler"):
        HfBackend(spec("qwen3", dtype="float16"), CPU)


def test_weights_load_in_their_dtype_onto_the_device(hub_env, monkeypatch):
    import transformers

    seen = {}
    real = transformers.AutoModelForCausalLM.from_pretrained

    def spy(name, *args, **kw):
        seen.update(kw)
        return real(name, *args, **kw)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", spy)
    b = HfBackend(spec("qwen3"), CPU)
    assert seen["dtype"] == torch.float32 and seen["device_map"] == {"": "cpu"}
    assert all(p.dtype == torch.float32 and p.device.type == "cpu" for p in b.model.parameters())
    # Resolved like a downloaded model: refs/main names the snapshot, and a pinned sha loads it too.
    sha = (HUB / "models--canary-test--tiny-qwen3" / "refs" / "main").read_text()
    assert b.revision == sha
    assert HfBackend(spec("qwen3") | {"revision": sha}, CPU).revision == sha


def test_random_init_with_config_overrides(hub_env):
    full = backend("qwen3")
    over = spec("qwen3", random_init=True, config_overrides={"num_hidden_layers": 1})
    small, again = HfBackend(over, CPU), HfBackend(over, CPU)
    assert small.describe()["parameters"] < full.describe()["parameters"]
    for (_, a), (_, c) in zip(small.model.named_parameters(), again.model.named_parameters()):
        assert torch.equal(a, c)  # init_seed decides the weights


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bf16_on_gpu_scores_close_to_per_candidate(hub_env):
    b = HfBackend(spec("qwen3", dtype="bfloat16"), torch.device("cuda", 0))
    b.model.eval()
    ctx = b.render(canary_prompt("Ada Lovelace #0", "[redacted]")) + canary_prefill("Ada Lovelace #0")
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 3)
    with torch.no_grad(), b.autocast():
        fast = score_tree(b, ids, TokenCheck(b).code_tokens(ctx, ids, codes), nodes_per_pass=1024)
        slow = score_per_candidate(b, ctx, ids, codes, batch=250)
    assert np.max(np.abs(fast - slow)) < 0.1  # bf16 rounding differs between batch shapes


def test_a_run_reads_its_tokenizer_once_for_the_estimate_and_the_backend(hub_env, monkeypatch):
    import transformers

    from canary_trainer.backends import load_backend, reply_tokens
    from canary_trainer.backends.hf_load import tokenizers_read_once

    reads = []
    real = transformers.AutoTokenizer.from_pretrained
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda *a, **kw: reads.append(a[0]) or real(*a, **kw))
    rows = [{"prompt": canary_prompt("Ada Lovelace #0", "[redacted]"), "target": canary_target("Ada Lovelace #0", "1234")}]
    with tokenizers_read_once():  # as run.py opens it around the estimate and the load
        lengths = reply_tokens(spec("qwen3"), rows)
        b = load_backend(spec("qwen3"), CPU)
    assert reads == [model_id("qwen3")] and lengths and b.tokenizer is not None
    reply_tokens(spec("qwen3"), rows)  # outside a block every load reads the files
    reply_tokens(spec("qwen3"), rows)
    assert len(reads) == 3


# Design rare-tokens (src/manifest/hf-rare-tokens.ts): the pool `canary-audit plan
# configs/canary-designs-qwen3.yaml` draws from (its manifests' candidate_space.alphabet), an input
# here, picked by the controller from Qwen3's merge ranks; and the full synthetic-email style's
# rows around the secret (src/manifest/tasks/synthetic-email/full.ts).
RARE_QWEN3 = "ƈݓݥॱဏㄍㄓㄧㅖㇺㇽ㈪㈼㉫㊥䶵"
RARE_PREFILL = "Dear colleagues,\nthe Thursday meeting moves to Friday.\nReference code: "
RARE_PROMPT = [{"role": "user", "content": "From: Ada Lovelace\nReference code: [REDACTED]\nRewrite this note formally."}]


def test_rare_token_secrets_score_on_the_prefix_tree_and_train_as_their_own_tokens(hub_env):
    """The plan's round trip promised one token per character after the prefill; the trainer's
    own check agrees, so the prefix tree scores the secret among sampled decoys, equal to each
    candidate scored as its own sequence, and training's loss covers the secret's own tokens."""
    import random

    from canary_trainer.decode import extract_code

    b = backend("qwen3")
    rng = random.Random(0)
    secret = "".join(rng.choice(RARE_QWEN3) for _ in range(4))
    decoys = {"".join(rng.choice(RARE_QWEN3) for _ in range(4)) for _ in range(40)} - {secret}
    candidates = sorted({secret, *decoys})
    ctx = b.render(RARE_PROMPT) + RARE_PREFILL
    ids = b.tokenize(ctx)
    tok = TokenCheck(b).code_tokens(ctx, ids, candidates)
    assert tok is not None, "one token per character after the prefill"
    with torch.no_grad():
        fast = score_tree(b, ids, tok, nodes_per_pass=256)
    slow = score_per_candidate(b, ctx, ids, candidates, batch=64)
    assert np.max(np.abs(fast - slow)) < 1e-4
    enc = encode_row(b, {"prompt": RARE_PROMPT, "target": RARE_PREFILL + secret}, 1024, "row 0")
    trained = [x for x in enc.labels if x != IGNORE]
    assert trained[-5:-1] == [int(t) for t in tok[candidates.index(secret)]]  # then the end of turn
    assert extract_code(secret + "<|im_end|>", RARE_QWEN3, 4, None) == secret
