"""The hf backend's tokenization calls the Rust tokenizer directly (hf_text.rust_tokenizer); its ids
must be the transformers wrapper's, `tok(texts, add_special_tokens=False)["input_ids"]`, for every
family's real tokenizer and every kind of text the trainer tokenizes: rendered chats with their
special tokens, candidate codes after a context and after its tails, and awkward text."""

import pytest

pytest.importorskip("transformers")

from canary_trainer.backends.hf_text import HfText, rust_tokenizer  # noqa: E402
from canary_trainer.manifest import exhaustive_codes  # noqa: E402

from .fixtures import canary_prefill, canary_prompt, canary_target  # noqa: E402
from .hf_fixtures import hub_env, model_id  # noqa: E402,F401  (hub_env: fixture)

FAMILIES = ["qwen3", "llama3", "gemma3", "gptoss"]


def _text(family, **load):
    import transformers as tf

    t = HfText()
    t.tokenizer = tf.AutoTokenizer.from_pretrained(model_id(family), **load)
    t.template_kwargs = {"enable_thinking": False} if family == "qwen3" else {}
    return t


def _texts(t):
    ident = "Ada Lovelace #0"
    prompt = canary_prompt(ident, "[redacted]")
    ctx = t.render(prompt) + canary_prefill(ident)
    codes = exhaustive_codes("0123456789", 4)
    texts = [ctx + c for c in codes]
    texts += [ctx[cut:] + c for cut in (len(ctx) - 8, len(ctx) - 16, len(ctx) - 40) for c in codes[::97]]
    texts += [t.render(prompt, canary_target(ident, "4821")),
              t.render([{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "How long? " * 40}],
                       "Long."),
              "", " ", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\n", "naïve café – 東京 🙂",
              "12345678901234567890", " 0001", "code: 0x1F, 3.14159, -42", t.tokenizer.eos_token or "",
              (t.tokenizer.eos_token or "") + "after the end" + (t.tokenizer.bos_token or "")]
    return texts


def _wrapper(tok, texts):
    return [list(x) for x in tok(texts, add_special_tokens=False)["input_ids"]]


@pytest.mark.parametrize("family", FAMILIES)
def test_rust_ids_equal_the_wrappers(hub_env, family):
    t = _text(family)
    assert t._rust_for() is not None  # the direct path is the one under test
    texts = _texts(t)
    want = _wrapper(t.tokenizer, texts)
    assert t.tokenize_batch(texts) == want
    assert [t.tokenize(x) for x in texts[::250]] == want[::250]
    # special tokens in the text are matched as the wrapper matches them (one id each)
    end = t.tokenizer.eos_token
    assert t.tokenize(end) == [t.tokenizer.convert_tokens_to_ids(end)]


@pytest.mark.parametrize("family", ["qwen3", "llama3"])
def test_split_special_tokens_follows_the_wrapper(hub_env, family):
    t = _text(family, split_special_tokens=True)
    texts = _texts(t)[-3:]
    want = _wrapper(t.tokenizer, texts)
    assert t.tokenize_batch(texts) == want
    assert len(t.tokenize(t.tokenizer.eos_token)) > 1


def test_a_padded_wrapper_call_leaves_the_ids_alone(hub_env):
    t = _text("qwen3")
    before = t.tokenize_batch(["a", "a longer text"])
    t.tokenizer(["a", "a longer text"], padding=True, truncation=True, max_length=2)
    t.tokenizer.backend_tokenizer.enable_padding(length=16)
    assert t.tokenize_batch(["a", "a longer text"]) == before


def test_a_new_tokenizer_gets_its_own_rust_copy(hub_env):
    t = _text("qwen3")
    q = t.tokenize("Reference code: 4821")
    t.tokenizer = _text("gemma3").tokenizer
    assert t.tokenize("Reference code: 4821") == _wrapper(t.tokenizer, ["Reference code: 4821"])[0] != q


def test_a_tokenizer_without_a_rust_backend_uses_the_wrapper():
    class Slow:
        def __call__(self, text, add_special_tokens=True):
            assert add_special_tokens is False
            one = lambda s: [ord(ch) for ch in s]  # noqa: E731
            return {"input_ids": [one(s) for s in text] if isinstance(text, list) else one(text)}

    assert rust_tokenizer(Slow()) is None
    t = HfText()
    t.tokenizer = Slow()
    assert t.tokenize("ab") == [97, 98] and t.tokenize_batch(["a", "bc"]) == [[97], [98, 99]]
