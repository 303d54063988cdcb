"""Tree attention on a transformers causal LM: many prefix-tree nodes in one forward call.

The nodes of a chunk are laid out as one sequence after the prompt. Each attends to the whole
prompt (its cache, shared: never copied or repeated) and to its own ancestors and itself, with
position prompt_length + depth, so every node computes exactly what it would as the last token
of its own path. Layers with a sliding window (GPT-OSS, Gemma 3) get their own mask over the keys
their cache layer kept. The cache object passed to the model is a shallow clone whose tensors
are the prompt's: a layer's update concatenates into new tensors, so the prompt stays intact.
"""

from __future__ import annotations

import copy

import torch

SUPPORTED = ("eager", "sdpa")
HEAD_ROWS = 256  # nodes per block of the vocabulary projection


def shared_clone(cache):
    """A copy of a prompt cache that shares (does not copy) its key/value tensors."""
    memo: dict[int, torch.Tensor] = {}
    for layer in getattr(cache, "layers", []) or []:
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            if isinstance(t, torch.Tensor):
                memo[id(t)] = t
    for name in ("key_cache", "value_cache"):  # older transformers
        for t in getattr(cache, name, []) or []:
            memo[id(t)] = t
    return copy.deepcopy(cache, memo)


def ancestors(parent: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
    """(N, N) bool: node i may see node j (j is i or one of its ancestors)."""
    n = len(parent)
    allowed = torch.eye(n, dtype=torch.bool, device=parent.device)
    rows = torch.arange(n, device=parent.device)
    cur = parent.clone()
    for _ in range(int(depth.max()) if n else 0):
        ok = cur >= 0
        allowed[rows[ok], cur[ok]] = True
        cur = torch.where(ok, parent[cur.clamp(min=0)], cur)
    return allowed


def _kept(cache, layer: int) -> int:
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return int(layers[layer].keys.shape[-2])
    return int(cache.key_cache[layer].shape[-2])


def layer_kinds(config) -> list[str]:
    n = config.num_hidden_layers
    return list(getattr(config, "layer_types", None) or ["full_attention"] * n)


def tree_masks(config, cache, prompt_len: int, parent, depth, additive: bool):
    """The attention mask(s) for one chunk: a (1, 1, N, kept + N) tensor, or a dict by layer kind
    when the model has sliding-window layers."""
    anc = ancestors(parent, depth)
    pos = prompt_len + depth
    kinds = layer_kinds(config)
    masks = {}
    for kind in dict.fromkeys(kinds):
        kept = _kept(cache, kinds.index(kind))
        key_pos = torch.cat([torch.arange(prompt_len - kept, prompt_len, device=pos.device), pos])
        allowed = torch.cat([torch.ones(len(pos), kept, dtype=torch.bool, device=pos.device), anc], dim=1)
        if kind == "sliding_attention":
            allowed &= (pos[:, None] - key_pos[None, :]) < config.sliding_window
        elif kind != "full_attention":
            raise NotImplementedError(f"tree attention: layer kind {kind}")
        m = allowed[None, None]
        if additive:
            m = torch.zeros(m.shape, device=m.device).masked_fill(~m, torch.finfo(torch.float32).min)
        masks[kind] = m
    return masks if "sliding_attention" in masks else masks["full_attention"]


def supports(config) -> bool:
    impl = getattr(config, "_attn_implementation", None) or "eager"
    return impl in SUPPORTED and set(layer_kinds(config)) <= {"full_attention", "sliding_attention"}


def run_tree(model, config, state, tokens, parent, depth, rows, cols):
    """log p(cols[m] | path to node rows[m]) for each asked pair, float32 (M,). The vocabulary
    projection runs in blocks of HEAD_ROWS nodes (log-sum-exp and the asked columns only), so
    full (N, V) logits never exist."""
    cache = shared_clone(state.cache)
    additive = (getattr(config, "_attn_implementation", None) or "eager") != "sdpa"
    mask = tree_masks(config, cache, state.length, parent, depth, additive)
    pos = (state.length + depth)[None]
    cache_pos = torch.arange(state.length, state.length + len(tokens), device=tokens.device)
    out = model.get_decoder()(input_ids=tokens[None], past_key_values=cache, attention_mask=mask, position_ids=pos,
                              cache_position=cache_pos, use_cache=True)
    return _head_logprobs(model, config, out.last_hidden_state[0], rows, cols)


def _head_logprobs(model, config, hidden, rows, cols):
    head = model.get_output_embeddings()
    cap = getattr(config, "final_logit_softcapping", None)
    order = torch.argsort(rows, stable=True)
    rows_s, cols_s = rows[order], cols[order]
    out = torch.empty(len(rows), dtype=torch.float32, device=hidden.device)
    for s in range(0, hidden.shape[0], HEAD_ROWS):
        lo, hi = torch.searchsorted(rows_s, torch.tensor([s, s + HEAD_ROWS], device=rows.device)).tolist()
        if lo == hi:
            continue
        logits = head(hidden[s: s + HEAD_ROWS]).float()
        if cap:
            logits = torch.tanh(logits / cap) * cap
        lse = torch.logsumexp(logits, dim=-1)
        r = rows_s[lo:hi] - s
        out[order[lo:hi]] = logits[r, cols_s[lo:hi]] - lse[r]
    return out


def node_budget(config, device, prompt_len: int, vocab: int, limit_bytes: int | None) -> int:
    """Most nodes per forward call within the memory bound: a block of HEAD_ROWS logits, and per
    node the hidden states of every layer and the attention scores and mask over prompt + chunk,
    which grow with the chunk itself."""
    if limit_bytes is None:
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
            limit_bytes = free // 2
        else:
            limit_bytes = 1 << 30
    hidden = config.hidden_size * (config.num_hidden_layers + 4) * 4 * 4
    heads = getattr(config, "num_attention_heads", 1)
    fixed = HEAD_ROWS * vocab * 4 * 2
    n = 4096 * 8
    while n > 1:
        per_node = hidden + (heads * 4 + 8) * (prompt_len + n)
        if fixed + n * per_node <= limit_bytes:
            break
        n //= 2
    return max(n, 1)
