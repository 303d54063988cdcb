"""Text of the hf backend without the model: chat rendering and tokenization, shared by training
(HfBackend) and the controller's plan-time row-length check (`canary_trainer.check_rows`), so both
count exactly the same tokens."""

from __future__ import annotations

from typing import Any


class HfText:
    """Needs `self.tokenizer` (a transformers tokenizer) and `self.template_kwargs` (the manifest's
    model.hf.chat_template_kwargs)."""

    tokenizer: Any = None
    template_kwargs: dict = {}

    def render(self, messages, target=None):
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            if target is None:
                return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                               **self.template_kwargs)
            return tok.apply_chat_template(messages + [{"role": "assistant", "content": target}], tokenize=False,
                                           **self.template_kwargs)
        # No template (a base model): a plain, visible format. The assistant line ends with a newline,
        # not a space, which BPE tokenizers would merge into the reply's first word.
        text = (tok.bos_token or "") + "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:\n"
        if target is not None:
            text += target + (tok.eos_token or "")
        return text

    def tokenize(self, text):
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def tokenize_batch(self, texts):
        return [list(x) for x in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def decode(self, ids):
        return self.tokenizer.decode(ids, skip_special_tokens=True)
