"""One-at-a-time greedy decoding: the reference the batched decoder (greedy_batch.run_batched) must
equal, kept with the tests and benchmarks that compare against it. Each backend's loop feeds one
token at a time on its own cache, stopping at end-of-turn (not included) or the limit."""

from __future__ import annotations

import torch

from canary_trainer.backends.base import Backend
from canary_trainer.decode import extract_code, requests
from canary_trainer.greedy_batch import cut


def _tiny(backend, ctx_ids: list[int], max_new_tokens: int) -> list[int]:
    from canary_trainer.backends.tiny_tokenizer import END

    limit = min(max_new_tokens, backend.config.max_len - len(ctx_ids))
    idx = torch.tensor([ctx_ids], dtype=torch.long, device=backend.device)
    logits, past = backend.model(idx, last_only=True)
    out: list[int] = []
    for _ in range(max(limit, 0)):
        nxt = int(torch.argmax(logits[0]))
        if nxt == END:
            break
        out.append(nxt)
        if len(out) == limit:
            break
        step = torch.tensor([[nxt]], dtype=torch.long, device=backend.device)
        logits, past = backend.model(step, past=past, pos0=len(ctx_ids) + len(out) - 1, last_only=True)
    return out


def _hf(backend, ctx_ids: list[int], max_new_tokens: int) -> list[int]:
    limit = max_new_tokens
    if backend.max_positions():
        limit = min(limit, backend.max_positions() - len(ctx_ids))
    ids = torch.tensor([ctx_ids], dtype=torch.long, device=backend.device)
    keep = backend._keep(1)
    out = backend.model(input_ids=ids, use_cache=True, **keep)
    stop = backend.stop_ids()
    generated: list[int] = []
    for _ in range(max(limit, 0)):
        nxt = int(torch.argmax(out.logits[0, -1]))
        if nxt in stop:
            break
        generated.append(nxt)
        if len(generated) == limit:
            break
        step = torch.tensor([[nxt]], dtype=torch.long, device=backend.device)
        out = backend.model(input_ids=step, past_key_values=out.past_key_values, use_cache=True, **keep)
    return generated


def greedy_ids(backend: Backend, ctx_ids: list[int], max_new_tokens: int) -> list[int]:
    """Greedy continuation of ctx_ids, stopping at end-of-turn (not included) or the limit."""
    return (_tiny if backend.name == "tiny" else _hf)(backend, ctx_ids, max_new_tokens)


def greedy(backend: Backend, messages: list[dict], prefill: str, mode: str, max_new_tokens: int,
           alphabet: str, length: int, generate=greedy_ids) -> dict:
    """{"text", "code"} for one decode mode ("prefill" or "free") of one probe, one at a time
    (`generate(backend, ctx_ids, limit)` gives the continuation)."""
    [(ctx, limit, rule)] = requests(backend, messages, prefill, [mode], max_new_tokens, alphabet, length)
    text = backend.decode(cut(backend, generate(backend, ctx, limit), rule))
    return {"text": text, "code": extract_code(text, alphabet, length, None if mode == "prefill" else prefill)}
