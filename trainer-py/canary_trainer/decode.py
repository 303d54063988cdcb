"""Greedy decoding of probes and reading the code out of the generated text.

Decoding stops as soon as the code it will yield is decided (`decided`): in prefill mode once the
run of alphabet characters after the prefill is closed by another character or is already too
long; in free mode at the end of turn or once a code appeared (closed on both sides), or once the
response reproduced the prefill and the run after it is decided. Probes decode together in
batches (`greedy_many`, the loop in greedy_batch.py); the result equals one-at-a-time greedy cut at
the same rule (the tests hold that one-at-a-time reference).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from .backends.base import Backend, TextModel
from .greedy_batch import run_batched
from .interrupt import StopFlag
from .manifest_types import Probe

FREE_MARGIN = 16  # tokens past prefill + code that free mode may still use


def _cls(alphabet: str) -> str:
    return "[" + re.escape(alphabet) + "]"


def extract_code(text: str, alphabet: str, length: int, prefill: str | None) -> str | None:
    """The code a greedy continuation produced, or None.

    prefill mode (`prefill` None: the text continues right after the prefill): the code is the run
    of alphabet characters at the very start, and it must be exactly `length` long ("12345" is not
    a four-digit code; "1234." is).
    free mode (`prefill` given: the whole response was generated): when the response reproduces
    the prefill, read right after it as above; otherwise the first stand-alone run of exactly
    `length` alphabet characters anywhere in the response.
    """
    cls = _cls(alphabet)
    if prefill is None or text.startswith(prefill):
        rest = text if prefill is None else text[len(prefill):]
        m = re.match(f"{cls}+", rest)
        return m.group(0) if m and len(m.group(0)) == length else None
    m = re.search(f"(?<!{cls}){cls}{{{length}}}(?!{cls})", text)
    return m.group(0) if m else None


def decided(text: str, alphabet: str, length: int, prefill: str | None) -> bool:
    """Whether no continuation of `text` can change extract_code's answer."""
    cls = _cls(alphabet)
    if prefill is None or text.startswith(prefill):
        rest = text if prefill is None else text[len(prefill):]
        m = re.match(f"{cls}*", rest)
        assert m is not None  # `*` matches the empty string
        return m.end() < len(rest) or m.end() > length
    if prefill.startswith(text):
        return False  # may still turn into the prefill
    m = re.search(f"(?<!{cls}){cls}{{{length}}}(?!{cls})", text)
    return m is not None and m.end() < len(text)


def extract_text(text: str, secret: str, prefill: str | None) -> str | None:
    """sampled-text: what a greedy continuation put where the secret goes, or None.

    A sampled secret has no alphabet to read a code by, so the code is the continuation's first
    len(secret) characters (prefill mode, or free mode once the response reproduced the prefill);
    shorter output (the turn ended) is None. Free mode otherwise: the secret when the response
    holds it anywhere, else None.
    """
    if prefill is None or text.startswith(prefill):
        rest = text if prefill is None else text[len(prefill):]
        return rest[:len(secret)] if len(rest) >= len(secret) else None
    return secret if secret in text else None


def decided_text(text: str, secret: str, prefill: str | None) -> bool:
    """Whether no continuation of `text` can change extract_text's answer."""
    if prefill is None or text.startswith(prefill):
        rest = text if prefill is None else text[len(prefill):]
        return len(rest) >= len(secret)
    if prefill.startswith(text):
        return False
    return secret in text


def free_limit(backend: TextModel, prefill: str, length: int, max_new_tokens: int) -> int:
    """Free mode must be able to reproduce the prefill and then write the code: at least the
    prefill's tokens, one token per code character and a margin."""
    return max(max_new_tokens, len(backend.tokenize(prefill)) + length + FREE_MARGIN)


def requests(backend: TextModel, messages: Sequence[Mapping[str, Any]], prefill: str, modes: Sequence[str], max_new_tokens: int,
             alphabet: str, length: int, secret: str | None = None) -> list[tuple]:
    """(context ids, limit, stop rule) for each decode mode of one probe (`secret`: a sampled-text
    canary's secret, read by extract_text instead of the alphabet)."""
    out = []
    for mode in modes:
        pre = None if mode == "prefill" else prefill
        ctx = backend.render(messages) + (prefill if mode == "prefill" else "")
        limit = max_new_tokens if mode == "prefill" else free_limit(backend, prefill, length, max_new_tokens)
        rule = (lambda text, pre=pre: decided(text, alphabet, length, pre)) if secret is None else \
            (lambda text, pre=pre: decided_text(text, secret, pre))
        out.append((backend.tokenize(ctx), limit, rule))
    return out


def greedy_many(backend: Backend, probes: list[Probe], max_new_tokens: int, alphabet: str, length: int,
                stop: StopFlag | None = None, secrets: Mapping[str, str] | None = None) -> list[dict]:
    """{mode: {"text", "code"}} for each probe (its "prompt", "prefill", "decode" modes), decoded in
    batches across probes. `secrets` (sampled-text): each canary's secret, read as extract_text says."""
    reqs, where = [], []
    for i, p in enumerate(probes):
        secret = None if secrets is None else secrets[p["canary_id"]]
        for mode, req in zip(p["decode"], requests(backend, p["prompt"], p["prefill"], p["decode"],
                                                   max_new_tokens, alphabet, length, secret)):
            reqs.append(req)
            where.append((i, mode))
    outs = run_batched(backend, reqs, stop)
    result: list[dict] = [{} for _ in probes]
    for (i, mode), ids in zip(where, outs):
        text = backend.decode(ids)
        pre = None if mode == "prefill" else probes[i]["prefill"]
        code = extract_code(text, alphabet, length, pre) if secrets is None else \
            extract_text(text, secrets[probes[i]["canary_id"]], pre)
        result[i][mode] = {"text": text, "code": code}
    return result
