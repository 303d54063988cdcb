"""Text of the hf backend without the model: chat rendering and tokenization, shared by training
(HfBackend) and the controller's plan-time row-length check (`canary_trainer.check_rows`), so both
count exactly the same tokens."""

from __future__ import annotations

from typing import Any, Mapping, Sequence


def rust_tokenizer(tok: Any) -> Any | None:
    """A private copy of a fast tokenizer's Rust `tokenizers.Tokenizer`, set up as the transformers
    wrapper sets it for `tok(text, add_special_tokens=False)`: no padding, no truncation, special
    tokens in the text matched unless the wrapper splits them. Calling it directly skips the
    wrapper's per-text Python (validation, a dict per encoding, then merging the dicts), which is
    most of the cost of tokenizing 10,000 candidates; the ids are the same (the wrapper calls this
    very `encode_batch`). A copy, so a padded call through the wrapper elsewhere cannot leave state
    behind that changes these ids. None for a tokenizer without a Rust backend (the wrapper then)."""
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        return None
    from tokenizers import Tokenizer

    rust = Tokenizer.from_str(backend.to_str())
    rust.no_padding()
    rust.no_truncation()
    rust.encode_special_tokens = bool(getattr(tok, "split_special_tokens", False))
    return rust


class HfText:
    """Needs `self.tokenizer` (a transformers tokenizer) and `self.template_kwargs` (the manifest's
    model.hf.chat_template_kwargs). A vision-language model sets `vision` (hf_vision.Vision) and
    `chat_template` (its processor's template): image parts then render as markers and tokenize
    to their image tokens."""

    tokenizer: Any = None
    template_kwargs: dict = {}
    vision: Any = None
    chat_template: str | None = None
    _rust: tuple[Any, Any] | None = None  # (the tokenizer it was made from, its Rust copy or None)

    def _rust_for(self) -> Any:
        if self._rust is None or self._rust[0] is not self.tokenizer:
            self._rust = (self.tokenizer, rust_tokenizer(self.tokenizer))
        return self._rust[1]

    def render(self, messages: Sequence[Mapping[str, Any]], target: str | None = None) -> str:
        tok = self.tokenizer
        if self.vision is not None:
            kw = dict(self.template_kwargs, chat_template=self.chat_template) if self.chat_template else \
                self.template_kwargs
            if target is None:
                text = tok.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True, **kw)
            else:
                text = tok.apply_chat_template(list(messages) + [{"role": "assistant", "content": target}],
                                               tokenize=False, **kw)
            return self.vision.place(text, messages)
        if getattr(tok, "chat_template", None):
            if target is None:
                return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                               **self.template_kwargs)
            return tok.apply_chat_template(list(messages) + [{"role": "assistant", "content": target}], tokenize=False,
                                           **self.template_kwargs)
        # No template (a base model): a plain, visible format. The assistant line ends with a newline,
        # not a space, which BPE tokenizers would merge into the reply's first word.
        text = (tok.bos_token or "") + "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:\n"
        if target is not None:
            text += target + (tok.eos_token or "")
        return text

    def tokenize(self, text: str) -> list[int]:
        if self.vision is not None:
            return self.tokenize_batch([text])[0]
        rust = self._rust_for()
        if rust is not None:
            return rust.encode(text, add_special_tokens=False).ids
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def tokenize_batch(self, texts: list[str]) -> list[list[int]]:
        if self.vision is not None:
            return self.vision.tokenize_batch(list(texts), self._tokenize_plain)
        return self._tokenize_plain(texts)

    def _tokenize_plain(self, texts: list[str]) -> list[list[int]]:
        rust = self._rust_for()
        if rust is not None:
            # encode_batch_fast: the same ids without the character offsets (not read here).
            return [e.ids for e in rust.encode_batch_fast(list(texts), add_special_tokens=False)]
        return [list(x) for x in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def decode(self, ids: list[int]) -> str:
        if self.vision is not None:
            ids = [i for i in ids if i < self.vision.base]
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def added_texts(self) -> set[str]:
        return set(self.tokenizer.get_added_vocab())


def reply_lengths(spec: Mapping[str, Any], rows: list[dict]) -> list[int]:
    """Each row's reply tokens under the model's tokenizer and chat template, read without the
    weights: the rendered prompt + target's tokens minus the rendered prompt's. Training's targets
    are these up to the end of turn (batches.encode_row), so this bounds them; the memory estimate
    sizes the logits of a micro-batch by it."""
    from .hf_load import import_transformers, load_tokenizer_and_config

    hf = spec["hf"]
    load_kw = {"revision": spec.get("revision"), "local_files_only": True,
               "trust_remote_code": hf.get("trust_remote_code", False)}
    text = HfText()
    text.tokenizer, _ = load_tokenizer_and_config(import_transformers(), spec, load_kw)
    text.template_kwargs = dict(hf.get("chat_template_kwargs") or {})
    if not rows:
        return []
    prompts = text.tokenize_batch([text.render(r["prompt"]) for r in rows])
    full = text.tokenize_batch([text.render(r["prompt"], r["target"]) for r in rows])
    return [max(0, len(f) - len(p)) for p, f in zip(prompts, full)]
