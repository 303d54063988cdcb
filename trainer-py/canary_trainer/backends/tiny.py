"""The built-in tiny backend: TinyGPT + the character tokenizer, on CPU or one GPU."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import ModelBackend, PrefixState
from .tiny_model import TinyConfig, TinyGPT
from .tiny_tokenizer import END, PAD, CharTokenizer

GREEDY_ROWS = 64


class TinyBackend(ModelBackend):
    name = "tiny"

    def __init__(self, spec: dict, device: torch.device):
        self.tokenizer = CharTokenizer()
        t = spec["tiny"]
        self.config = TinyConfig(vocab_size=self.tokenizer.vocab_size, n_layer=t["n_layer"], n_head=t["n_head"],
                                 d_model=t["d_model"], max_len=t["max_len"], dropout=t["dropout"])
        # Initialisation draws from the global generator: seeding it here makes the starting
        # weights a function of init_seed alone.
        torch.manual_seed(spec["init_seed"])
        self.model = TinyGPT(self.config).to(device)
        self.device = device
        self.model_label = spec["name"]
        self.revision = spec.get("revision")

    def render(self, messages, target=None):
        return self.tokenizer.render(messages, target)

    def tokenize(self, text):
        return self.tokenizer.encode(text)

    def decode(self, ids):
        return self.tokenizer.decode(ids)

    @property
    def pad_id(self) -> int:
        return PAD

    def max_positions(self):
        return self.config.max_len

    def logits(self, ids, keep_last=None):
        out = self.model(ids)[0]
        return out if keep_last is None else out[:, out.shape[1] - keep_last:]

    def prefix(self, ctx_ids):
        idx = torch.tensor([ctx_ids], dtype=torch.long, device=self.device)
        logits, kv = self.model(idx, last_only=True)
        return PrefixState(kv, len(ctx_ids), F.log_softmax(logits[0].float(), dim=-1))

    def extend(self, state, paths, cols, carry=None, parent_of=None):
        if carry is None:  # first level below the prompt, or a caller without a tree
            logits, kv = self.model(paths, prefix=state.cache, pos0=state.length, last_only=True)  # (N, V)
        else:
            # Each node adds one token on top of its parent's own keys/values (gathered, (N, H, l-1, hd)).
            past = [(k.index_select(0, parent_of), v.index_select(0, parent_of)) for k, v in carry]
            logits, kv = self.model(paths[:, -1:], past=past, prefix=state.cache,
                                    pos0=state.length + paths.shape[1] - 1, last_only=True)
        return F.log_softmax(logits.float(), dim=-1).index_select(1, cols), kv

    def join_carry(self, parts):
        return [(torch.cat([p[i][0] for p in parts]), torch.cat([p[i][1] for p in parts])) for i in range(len(parts[0]))]

    def stop_ids(self):
        return {END}

    def greedy_groups(self, lengths, limits):
        """Contexts of equal length decode together (one position per step for the whole batch)."""
        by_len: dict[int, list[int]] = {}
        for i, n in enumerate(lengths):
            by_len.setdefault(n, []).append(i)
        return [g[s: s + GREEDY_ROWS] for g in by_len.values() for s in range(0, len(g), GREEDY_ROWS)]

    def greedy_start(self, ctxs):
        idx = torch.tensor(ctxs, dtype=torch.long, device=self.device)
        logits, past = self.model(idx, last_only=True)
        return logits, (past, idx.shape[1])

    def greedy_step(self, state, tokens):
        past, pos = state
        logits, past = self.model(tokens[:, None], past=past, pos0=pos, last_only=True)
        return logits, (past, pos + 1)

    def greedy_keep(self, state, rows):
        past, pos = state
        return [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in past], pos
