"""Greedy decoding of a probe and reading the code out of the generated text."""

from __future__ import annotations

import re

from .backends import Backend


def extract_code(text: str, alphabet: str, length: int, prefill: str | None) -> str | None:
    """The code a greedy continuation produced, or None.

    prefill mode (`prefill` None: the text continues right after the prefill): the code is the run
    of alphabet characters at the very start, and it must be exactly `length` long ("12345" is not
    a four-digit code; "1234." is).
    free mode (`prefill` given: the whole response was generated): when the response reproduces
    the prefill, read right after it as above; otherwise the first stand-alone run of exactly
    `length` alphabet characters anywhere in the response.
    """
    cls = "[" + re.escape(alphabet) + "]"
    if prefill is None or text.startswith(prefill):
        rest = text if prefill is None else text[len(prefill):]
        m = re.match(f"{cls}+", rest)
        return m.group(0) if m and len(m.group(0)) == length else None
    m = re.search(f"(?<!{cls}){cls}{{{length}}}(?!{cls})", text)
    return m.group(0) if m else None


def greedy(backend: Backend, messages: list[dict], prefill: str, mode: str, max_new_tokens: int,
           alphabet: str, length: int) -> dict:
    """{"text", "code"} for one decode mode ("prefill" or "free")."""
    ctx = backend.render(messages) + (prefill if mode == "prefill" else "")
    text = backend.decode(backend.greedy(backend.tokenize(ctx), max_new_tokens))
    return {"text": text, "code": extract_code(text, alphabet, length, None if mode == "prefill" else prefill)}
