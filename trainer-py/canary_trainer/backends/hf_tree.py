"""Tree attention on a transformers causal LM: many probes' prefix trees in one forward call.

Prompts of a group run together once (`run_prompts`): left-padded to the longest, with an
attention mask and per-row position ids (each row counts from its own first token), so every row
ends at the same cache index and a sliding-window layer's kept keys are each row's last ones. The
padding's keys/values are zeroed. Then each probe's tree nodes (a batch row per probe, padded to
the largest tree) attend to their own prompt row (its cache, shared: never copied or repeated per
node) and to their own ancestors and themselves, with position prompt length + depth, so every
node computes exactly what it would as the last token of its own path. Layers with a sliding
window (GPT-OSS, Gemma 3) get their own mask over the keys their cache layer kept. The cache
object passed to the model is a shallow clone whose layers read the prompt's tensors and return
them concatenated with the nodes' keys/values without storing anything, so the prompt stays
intact and no layer's concatenation outlives its attention.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F

from ..memory import HEAD_ROWS, VOCAB_TILE, config_shape, tree_call_bytes

SUPPORTED = ("eager", "sdpa")


class TreePrompts:
    """Prompts run together: the left-padded cache (one row per probe, `width` positions), each
    row's prompt length, and each row's next-token log-probabilities (P, V) float32. A vision
    model's rows also carry position offsets (P,): a node at depth d below row p's prompt sits at
    position lengths[p] + offsets[p] + d (Qwen2.5-VL's 3D rope: an image spans fewer positions
    than tokens)."""

    def __init__(self, cache: Any, lengths: torch.Tensor, width: int, next_logprobs: torch.Tensor,
                 offsets: torch.Tensor | None = None):
        self.cache = cache
        self.lengths = lengths
        self.width = width
        self.next_logprobs = next_logprobs
        self.offsets = offsets


def _layer_tensors(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) of each cache layer."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(layer.keys, layer.values) for layer in layers]
    return list(zip(cache.key_cache, cache.value_cache))  # older transformers


def run_prompts(model: Any, keep_kw: dict, ctxs: list[list[int]], pad: int, device: torch.device,
                inputs: Any = None) -> TreePrompts:
    """`inputs` (a vision model's): (ids, mask or None) -> the forward's keyword arguments and each
    row's position offset; it replaces input_ids and the positions counted here."""
    width = max(len(c) for c in ctxs)
    lengths = torch.tensor([len(c) for c in ctxs], dtype=torch.long)
    ids = torch.full((len(ctxs), width), pad, dtype=torch.long)
    for r, c in enumerate(ctxs):
        ids[r, width - len(c):] = torch.tensor(c)
    ids, lengths = ids.to(device), lengths.to(device)
    offsets = None
    if bool((lengths == width).all()):  # no padding: a plain causal call
        if inputs is None:
            out = model(input_ids=ids, use_cache=True, **keep_kw)
        else:
            kw, offsets = inputs(ids, None)
            out = model(**kw, use_cache=True, **keep_kw)
    else:
        mask = torch.arange(width, device=device)[None] >= (width - lengths)[:, None]
        if inputs is None:
            pos = (mask.cumsum(1) - 1).clamp(min=0)
            out = model(input_ids=ids, attention_mask=mask.long(), position_ids=pos, use_cache=True, **keep_kw)
        else:
            kw, offsets = inputs(ids, mask.long())
            out = model(**kw, use_cache=True, **keep_kw)
        for keys, values in _layer_tensors(out.past_key_values):
            kept = keys.shape[-2]
            pad_kv = torch.arange(kept, device=device)[None] < (kept - lengths)[:, None]  # (P, kept)
            keys.masked_fill_(pad_kv[:, None, :, None], 0)
            values.masked_fill_(pad_kv[:, None, :, None], 0)
    lp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
    return TreePrompts(out.past_key_values, lengths, width, lp, offsets)


def _peek(layer: Any, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
          **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.cat([layer.keys, key_states], dim=-2), torch.cat([layer.values, value_states], dim=-2)


def shared_clone(cache: Any) -> Any:
    """A copy of a prompt cache that shares (does not copy) its key/value tensors; its layers
    return prompt + new keys/values without storing them."""
    memo: dict[int, torch.Tensor] = {}
    for layer in getattr(cache, "layers", []) or []:
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            if isinstance(t, torch.Tensor):
                memo[id(t)] = t
    for name in ("key_cache", "value_cache"):  # older transformers
        for t in getattr(cache, name, []) or []:
            memo[id(t)] = t
    clone = copy.deepcopy(cache, memo)
    for layer in getattr(clone, "layers", []) or []:
        layer.update = _peek.__get__(layer)
    return clone


def ancestors(parent: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
    """(P, N, N) bool: in row p, node i may see node j (j is i or one of its ancestors)."""
    p, n = parent.shape
    allowed = torch.eye(n, dtype=torch.bool, device=parent.device).repeat(p, 1, 1)
    batch = torch.arange(p, device=parent.device)[:, None].expand(p, n)
    rows = torch.arange(n, device=parent.device)[None].expand(p, n)
    cur = parent.clone()
    for _ in range(int(depth.max()) if parent.numel() else 0):
        ok = cur >= 0
        allowed[batch[ok], rows[ok], cur[ok]] = True
        cur = torch.where(ok, parent.gather(1, cur.clamp(min=0)), cur)
    return allowed


def _kept(cache: Any, layer: int) -> int:
    return int(_layer_tensors(cache)[layer][0].shape[-2])


def layer_kinds(config: Any) -> list[str]:
    n = config.num_hidden_layers
    return list(getattr(config, "layer_types", None) or ["full_attention"] * n)


def tree_masks(config: Any, cache: Any, lengths: torch.Tensor, parent: torch.Tensor, depth: torch.Tensor,
               additive: bool) -> torch.Tensor | dict[str, torch.Tensor]:
    """The attention mask(s) of one call: a (P, 1, N, kept + N) tensor, or a dict by layer kind
    when the model has sliding-window layers. The cache's kept keys of row p are its last `kept`
    positions: real positions lengths[p] - kept ... lengths[p] - 1, padding below 0."""
    anc = ancestors(parent, depth)
    pos = lengths[:, None] + depth  # (P, N)
    kinds = layer_kinds(config)
    masks = {}
    for kind in dict.fromkeys(kinds):
        kept = _kept(cache, kinds.index(kind))
        key_pos = lengths[:, None] - kept + torch.arange(kept, device=pos.device)[None]  # (P, kept)
        prompt = (key_pos >= 0)[:, None, :].expand(-1, pos.shape[1], -1)
        allowed = torch.cat([prompt, anc], dim=2)  # (P, N, kept + N)
        if kind == "sliding_attention":  # pos - key position < window, without materialising the difference
            all_pos = torch.cat([key_pos, pos], dim=1)
            allowed &= all_pos[:, None, :] > (pos - config.sliding_window)[:, :, None]
        elif kind != "full_attention":
            raise NotImplementedError(f"tree attention: layer kind {kind}")
        m = allowed[:, None]
        if additive:
            m = torch.zeros(m.shape, device=m.device).masked_fill(~m, torch.finfo(torch.float32).min)
        masks[kind] = m
    return masks if "sliding_attention" in masks else masks["full_attention"]


def supports(config: Any) -> bool:
    impl = getattr(config, "_attn_implementation", None) or "eager"
    return impl in SUPPORTED and set(layer_kinds(config)) <= {"full_attention", "sliding_attention"}


def run_tree(model: Any, config: Any, prompts: TreePrompts, tokens: torch.Tensor, parent: torch.Tensor,
             depth: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """log p(cols[m] | path to node rows[m]) for each asked pair, float32 (M,). tokens, parent,
    depth are (P, N): row p is probe p's nodes (parent -1: the prompt; parents first; padding
    nodes are never asked); rows index the flattened (P * N) nodes. The vocabulary projection
    runs in blocks of HEAD_ROWS asked nodes, each over the vocabulary in VOCAB_TILE-column chunks
    (`tiled_head`: log-sum-exp and the asked columns only), so neither full (N, V) logits nor a
    block's (HEAD_ROWS, V) ever exist."""
    cache = shared_clone(prompts.cache)
    additive = (getattr(config, "_attn_implementation", None) or "eager") != "sdpa"
    mask = tree_masks(config, cache, prompts.lengths, parent, depth, additive)
    pos = prompts.lengths[:, None] + depth
    if prompts.offsets is not None:
        pos = pos + prompts.offsets[:, None]
    cache_pos = torch.arange(prompts.width, prompts.width + tokens.shape[1], device=tokens.device)
    out = model.get_decoder()(input_ids=tokens, past_key_values=cache, attention_mask=mask, position_ids=pos,
                              cache_position=cache_pos, use_cache=True)
    del mask, cache
    hidden = out.last_hidden_state
    hidden = hidden.reshape(-1, hidden.shape[-1])
    used, rows = torch.unique(rows, return_inverse=True)
    return _head_logprobs(model, config, hidden[used], rows, cols)


def _head_logprobs(model: Any, config: Any, hidden: torch.Tensor, rows: torch.Tensor,
                   cols: torch.Tensor) -> torch.Tensor:
    head = model.get_output_embeddings()
    cap = getattr(config, "final_logit_softcapping", None)
    order = torch.argsort(rows, stable=True)
    rows_s, cols_s = rows[order], cols[order]
    out = torch.empty(len(rows), dtype=torch.float32, device=hidden.device)
    for s in range(0, hidden.shape[0], HEAD_ROWS):
        lo, hi = torch.searchsorted(rows_s, torch.tensor([s, s + HEAD_ROWS], device=rows.device)).tolist()
        if lo == hi:
            continue
        r = rows_s[lo:hi] - s
        lse, picked = tiled_head(hidden[s: s + HEAD_ROWS], head.weight, head.bias, cap, r, cols_s[lo:hi])
        out[order[lo:hi]] = picked - lse[r]
    return out


def tiled_head(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, cap: float | None,
               rows: torch.Tensor, cols: torch.Tensor, tile: int = VOCAB_TILE) -> tuple[torch.Tensor, torch.Tensor]:
    """The output projection's log-sum-exp over the vocabulary (R,) and the logits at the asked
    (rows[m], cols[m]) pairs (M,), float32, for hidden states (R, H) and an output matrix (V, H):
    the vocabulary in `tile`-column chunks with an online log-sum-exp (a running maximum, the sum
    rescaled when it rises), so (R, tile) logits exist at a time instead of (R, V). Each chunk is
    the same projection of the same rows as one (R, V) call, cut by columns; only the
    log-sum-exp's summation order differs from torch.logsumexp's."""
    n = hidden.shape[0]
    top = torch.full((n,), -torch.inf, dtype=torch.float32, device=hidden.device)
    total = torch.zeros(n, dtype=torch.float32, device=hidden.device)
    picked = torch.empty(len(rows), dtype=torch.float32, device=hidden.device)
    for v in range(0, weight.shape[0], tile):
        logits = F.linear(hidden, weight[v: v + tile], None if bias is None else bias[v: v + tile]).float()  # (R, tile)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        new_top = torch.maximum(top, logits.amax(dim=-1))
        # exp(-inf - finite) is 0: the first chunk's rescale of the empty sum
        total = total * torch.exp(top - new_top) + torch.exp(logits - new_top[:, None]).sum(dim=-1)
        top = new_top
        here = (cols >= v) & (cols < v + tile)
        picked[here] = logits[rows[here], cols[here] - v]
    return top + torch.log(total), picked


def memory_limit(device: torch.device, limit_bytes: int | None) -> int:
    """The memory bound of a scoring group: `limit_bytes` when set, else half the GPU memory this
    process can still use (free plus what its allocator holds unused), 1 GiB on the CPU."""
    if limit_bytes is not None:
        return limit_bytes
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return (free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)) // 2
    return 1 << 30


def call_bytes(config: Any, dtype_bytes: int, probes: int, prompt_len: int, nodes: int) -> int:
    return tree_call_bytes(config_shape(config), probes=probes, prompt_len=prompt_len, nodes=nodes,
                           c=dtype_bytes)["peak"]
