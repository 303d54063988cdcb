"""Batched greedy decoding for the hf backend: left-padded contexts with an attention mask and
explicit position ids (each row counts positions from its own first token), one token per row per
step on the shared cache, finished rows dropped with the cache's reorder_cache. Rows of similar
length are grouped, as many per batch as the memory bound allows."""

from __future__ import annotations

from typing import Any

import torch


def groups(config: Any, device: torch.device, lengths: list[int], limits: list[int], limit_bytes: int | None) -> list[list[int]]:
    if limit_bytes is None:
        limit_bytes = torch.cuda.mem_get_info(device)[0] // 4 if device.type == "cuda" else 1 << 30
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    per_token = config.num_hidden_layers * heads * head_dim * 2 * 4
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    out: list[list[int]] = []
    width = 0
    for i in order:
        w = max(width, lengths[i] + limits[i])
        if out and (len(out[-1]) + 1) * (w * per_token + vocab_bytes(config)) <= limit_bytes:
            out[-1].append(i)
            width = w
        else:
            out.append([i])
            width = lengths[i] + limits[i]
    return out


def vocab_bytes(config: Any) -> int:
    return config.vocab_size * 4 * 2


def start(model: Any, keep_kw: dict, ctxs: list[list[int]], pad: int, device: torch.device,
          inputs: Any = None) -> tuple[torch.Tensor, Any]:
    """`inputs` (a vision model's): (ids, mask) -> the forward's keyword arguments and each row's
    position offset (the next token's position is the row's length + offset)."""
    width = max(len(c) for c in ctxs)
    ids = torch.full((len(ctxs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(ctxs), width), dtype=torch.long)
    for r, c in enumerate(ctxs):
        ids[r, width - len(c):] = torch.tensor(c)
        mask[r, width - len(c):] = 1
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    if inputs is None:
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **keep_kw)
        return out.logits[:, -1].float(), (out.past_key_values, mask, pos[:, -1])
    kw, offsets = inputs(ids, mask)
    out = model(**kw, use_cache=True, **keep_kw)
    return out.logits[:, -1].float(), (out.past_key_values, mask, pos[:, -1] + offsets)


def step(model: Any, state: Any, tokens: torch.Tensor) -> tuple[torch.Tensor, Any]:
    cache, mask, last = state
    mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
    last = last + 1
    out = model(input_ids=tokens[:, None], past_key_values=cache, attention_mask=mask, position_ids=last[:, None],
                use_cache=True)
    return out.logits[:, -1].float(), (out.past_key_values, mask, last)


def keep(state: Any, rows: torch.Tensor) -> Any:
    cache, mask, last = state
    cache.reorder_cache(rows)
    return cache, mask.index_select(0, rows), last.index_select(0, rows)
