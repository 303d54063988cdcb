"""A small GPT-style causal LM in plain PyTorch (works on torch 1.13 and 2.x).

Pre-LayerNorm blocks, rotary position embeddings (RoPE), tied input/output embeddings. Attention
is written out with matmuls (no fused kernels) so CPU results are bitwise reproducible for a fixed
thread count, and so it can attend to a *shared prefix* cache: one prompt's keys and values,
batch 1, broadcast against N candidate paths without being copied N times.

Why rotary positions: with them the attention score between two tokens depends on their offset,
not on where they sit. A small model then learns "copy the code from the line above" once, for
every row length; with learned absolute positions it has to learn it per position and, measured,
did not learn to copy a four-digit code across rows of varying length in 1,500 updates (0/60),
while the same model with RoPE copied 60/60 held-out codes after 500.

Queries and keys are rotated by their absolute position before anything is cached, so cached keys
(own past, shared prefix) are already rotated and every path (training, prefix, extend, greedy)
computes the same function.

With a vision stem (`VisionConfig`, the tiny VLM), ids at or above the vocabulary are image tokens:
id = vocab_size + slot * tokens + j is token j of image `slot` of the model's `image_bank` (set by
the backend: slots -> (N, 1, H, W) pixel tensors). The stem, a few 3x3 convolutions with max
pooling, average-pooled to a rows x cols grid of d_model vectors, embeds them in place of token
embeddings; everything after (blocks, caches, scoring) is unchanged. A linear patch embedding did
not learn to read a code in a prototype (0.01 whole-code accuracy, one seed) where a small conv
stem reached 1.00 (one seed). Without a vision stem nothing here changes (same modules, same
initialisation draws, same function).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

# Per layer: (keys, values), each (B, H, S, head_dim).
KV = list[tuple[torch.Tensor, torch.Tensor]]

_SDPA = getattr(F, "scaled_dot_product_attention", None)
_BIAS: dict[tuple, torch.Tensor] = {}
ROPE_BASE = 10000.0


def rope_tables(max_len: int, head_dim: int, base: float = ROPE_BASE) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, (max_len, head_dim/2): position p turns pair i by p * base^(-2i/head_dim).
    Computed in float64 and rounded once, so every device and every path reads identical tables."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv[None, :]
    return angles.cos().float(), angles.sin().float()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (..., T, hd) by the (T, hd/2) tables: dimension i pairs with i + hd/2 (the "half"
    layout of GPT-NeoX/Llama, cheaper than interleaved pairs: no strided views)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def _causal_bias(T: int, S: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(T, S) additive mask: 0 where query t (at position S-T+t) may see key s, -inf elsewhere."""
    key = (T, S, str(device), dtype)
    bias = _BIAS.get(key)
    if bias is None:
        allowed = torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)
        bias = torch.zeros(T, S, dtype=dtype, device=device).masked_fill(~allowed, float("-inf"))
        if len(_BIAS) > 256:
            _BIAS.clear()
        _BIAS[key] = bias
    return bias


@dataclass(frozen=True)
class VisionConfig:
    height: int = 48  # pixels the crop is resized to
    width: int = 112
    channels: tuple[int, ...] = (16, 32)  # conv layers before the last, each followed by 2x2 max pooling
    rows: int = 3  # image tokens: rows x cols
    cols: int = 8

    @property
    def tokens(self) -> int:
        return self.rows * self.cols


class VisionStem(nn.Module):
    """(N, 1, H, W) grey pixels in [0, 1] -> (N, rows*cols, d_model) image token embeddings."""

    def __init__(self, v: VisionConfig, d_model: int):
        super().__init__()
        self.v = v
        chans = (1, *v.channels)
        self.convs = nn.ModuleList(nn.Conv2d(a, b, 3, padding=1) for a, b in zip(chans, chans[1:]))
        self.out = nn.Conv2d(chans[-1], d_model, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d((v.rows, v.cols))
        self.pos = nn.Parameter(torch.zeros(v.tokens, d_model))
        self.ln = nn.LayerNorm(d_model)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = img
        for conv in self.convs:
            x = F.max_pool2d(F.gelu(conv(x)), 2)
        x = self.pool(self.out(x)).flatten(2).transpose(1, 2)  # (N, T, C)
        return self.ln(x + self.pos)


@dataclass(frozen=True)
class TinyConfig:
    vocab_size: int
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 128
    max_len: int = 256
    dropout: float = 0.0
    vision: VisionConfig | None = None


class Block(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.fc_out = nn.Linear(4 * cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def attend(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None,
               prefix: tuple[torch.Tensor, torch.Tensor] | None,
               rope: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        B, T, C = x.shape
        H, hd = self.n_head, C // self.n_head
        q, k, v = self.qkv(x).view(B, T, 3, H, hd).permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, T, hd)
        q, k = rotate(q, *rope), rotate(k, *rope)  # by absolute position, before k is cached
        if past is not None:
            k = torch.cat([past[0], k], dim=2)  # (B, H, S, hd), S = past + T
            v = torch.cat([past[1], v], dim=2)
        S = k.shape[2]
        if prefix is None and past is None and _SDPA is not None:
            # torch 2.x: the fused kernel (training and full-sequence scoring). torch 1.13 takes
            # the explicit path below.
            y = _SDPA(q, k, v, is_causal=True, dropout_p=self.drop.p if self.training else 0.0)
        else:
            q = q * (1.0 / math.sqrt(hd))  # scale the (smaller) queries, not the scores
            own = torch.matmul(q, k.transpose(-2, -1))  # (B, H, T, S)
            # Query t sits at own position S-T+t and sees own keys up to it.
            own = own + _causal_bias(T, S, x.device, own.dtype)
            if prefix is None:
                att = self.drop(F.softmax(own, dim=-1))
                y = torch.matmul(att, v)
            else:
                pk, pv = prefix[0][0], prefix[1][0]  # (H, P, hd), shared by every row
                P = pk.shape[1]
                # Fold the batch into the query axis, (H, B*T, hd): one bmm per head against the
                # single prefix. A broadcasting matmul would copy the prefix B times (measured: 70%
                # of the time).
                qf = q.permute(1, 0, 2, 3).reshape(H, B * T, hd)
                pre = torch.bmm(qf, pk.transpose(1, 2)).view(H, B, T, P).permute(1, 0, 2, 3)  # (B, H, T, P)
                att = F.softmax(torch.cat([pre, own], dim=-1), dim=-1)
                ap = att[..., :P].permute(1, 0, 2, 3).reshape(H, B * T, P)
                y_pre = torch.bmm(ap, pv).view(H, B, T, hd).permute(1, 0, 2, 3)  # (B, H, T, hd)
                y = y_pre + torch.matmul(att[..., P:], v)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.drop(self.proj(y)), (k, v)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                past: tuple[torch.Tensor, torch.Tensor] | None = None,
                prefix: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        a, kv = self.attend(self.ln1(x), past, prefix, rope)
        x = x + a
        x = x + self.drop(self.fc_out(F.gelu(self.fc(self.ln2(x)))))
        return x, kv


class TinyGPT(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        if (cfg.d_model // cfg.n_head) % 2:
            raise ValueError(f"head dimension {cfg.d_model // cfg.n_head} is odd; rotary positions rotate pairs")
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        cos, sin = rope_tables(cfg.max_len, cfg.d_model // cfg.n_head)
        # Derived from the config, not learned: kept out of state_dict (checkpoints, cached bases).
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(self._init)
        for block in self.blocks:  # GPT-2: scale residual projections by depth
            for lin in (block.proj, block.fc_out):
                nn.init.normal_(lin.weight, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))
        # Created after the decoder's initialisation, so the decoder's draws do not depend on it.
        self.vision = VisionStem(cfg.vision, cfg.d_model) if cfg.vision is not None else None
        self.image_bank: Callable[[list[int]], torch.Tensor] | None = None

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        """Token embeddings, image tokens (ids >= vocab_size) from the vision stem."""
        if self.vision is None:
            return self.tok(idx)
        V = self.cfg.vocab_size
        img = idx >= V
        if not bool(img.any()):
            return self.tok(idx)
        if self.image_bank is None:
            raise ValueError("image tokens but no image bank attached to the model")
        x = self.tok(idx.masked_fill(img, 0))
        code = idx[img] - V
        per = self.vision.v.tokens
        slots, inv = torch.unique(code // per, return_inverse=True)
        feats = self.vision(self.image_bank(slots.tolist()).to(x.device))  # (n, T, C)
        x[img] = feats[inv, code % per].to(x.dtype)
        return x

    def forward(self, idx: torch.Tensor, past: KV | None = None, prefix: KV | None = None,
                pos0: int = 0, last_only: bool = False) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """idx (B, T) token ids at positions pos0..pos0+T-1. `past`: this batch's own earlier keys
        and values (incremental decoding); `prefix`: a batch-1 cache shared by every row (candidate
        paths under one prompt). Returns logits (B, T, V) or (B, V) with last_only, and the new own
        cache (past + these tokens)."""
        B, T = idx.shape
        if pos0 + T > self.cfg.max_len:
            raise ValueError(f"sequence of {pos0 + T} tokens exceeds the model's max_len {self.cfg.max_len}")
        rope = (self.rope_cos[pos0: pos0 + T], self.rope_sin[pos0: pos0 + T])
        x = self.drop(self.embed(idx))  # (B, T, C): positions enter through the rotation only
        new: KV = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, rope, None if past is None else past[i], None if prefix is None else prefix[i])
            new.append(kv)
        if last_only:
            x = x[:, -1]  # (B, C)
        x = self.ln_f(x)
        return F.linear(x, self.tok.weight), new
