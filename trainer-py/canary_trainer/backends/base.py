"""What the trainer needs from a model, by concern: one small protocol each, so every module asks
for exactly what it uses and a backend implements what it supports.

- `TextModel`: chat rendering and tokenization (batches, decode, the plan-time row check).
- `TrainableModel`: the causal LM, its trainable weights and precision (train, per-candidate scoring).
- `PrefixScorer`: one prompt cache shared by many continuations, walked level by level (score.score_tree).
- `TreeScorer`: token-level prefix trees of several prompts in one tree-attention call (scoring/tree.py);
  optional: a backend declares it with `tree_scorer()` (None: not for this model).
- `BatchedGreedy`: greedy decoding of many contexts together (greedy_batch).

`Backend` is what every registered backend implements (all but `TreeScorer`). What a backend may or
may not do is declared, never probed: `tree_scorer()`, `target_logits` (None: project every
position), `attach_images` and `project_every_position` (no-ops where there is nothing to do), and
`compute_dtype`. `ModelBackend` holds the implementations the backends share and these defaults. Backends register by name in backends/__init__.py and are
imported lazily, so a missing optional package only matters when its backend is asked for. The base
model (random, pretrained, loaded) is put in place by `base_model.prepare_base`, not by the backend.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol, Sequence

import torch

# The label of a position that carries no loss (torch's cross-entropy ignore_index).
IGNORE = -100


class PrefixState:
    """A prompt run once: its cache, its length, and log-probabilities of the next token."""

    def __init__(self, cache: Any, length: int, next_logprobs: torch.Tensor):
        self.cache = cache
        self.length = length
        self.next_logprobs = next_logprobs  # (V,) float32


class TextModel(Protocol):
    def render(self, messages: Sequence[Mapping[str, Any]], target: str | None = None) -> str:
        """The exact text the model sees: the prompt messages followed by the assistant turn's
        opening (target None), or the whole conversation with `target` as the assistant reply."""
        ...

    def tokenize(self, text: str) -> list[int]:
        """Token ids of rendered text (special markers in the text map to their tokens)."""
        ...

    def tokenize_batch(self, texts: list[str]) -> list[list[int]]: ...

    def decode(self, ids: list[int]) -> str:
        """Text of generated ids, without end-of-turn markers."""
        ...

    def added_texts(self) -> set[str]:
        """The strings `tokenize` maps to one added token wherever they stand (chat markers, the
        template's own tags such as Qwen3's `<think>`): text that holds one is no plain text."""
        ...

    @property
    def pad_id(self) -> int: ...

    def end_of_turn(self) -> int | None:
        """The token that closes an assistant reply, when the format has one: a row trains up to
        and including it, never the template's text after it (a newline, the next turn's header)."""
        ...

    def max_positions(self) -> int | None:
        """Longest sequence the model accepts, when it has a hard limit."""
        ...


class TrainableModel(Protocol):
    name: str
    model: torch.nn.Module
    device: torch.device
    # The dtype the model computes in ("float32", "bfloat16"): the numerics result.json records.
    dtype_name: str
    compute_dtype: torch.dtype

    @property
    def pad_id(self) -> int: ...

    def logits(self, ids: torch.Tensor, keep_last: int | None = None) -> torch.Tensor:
        """Full forward pass: ids (B, T) right-padded -> logits (B, T, V), or only the last
        `keep_last` positions (B, keep_last, V) (a large vocabulary makes full logits costly)."""
        ...

    def target_logits(self, ids: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(logits (N, V), targets (N,)) at the N target positions of a right-padded batch, the
        vocabulary projected there only; None: this model projects every position (`logits`)."""
        ...

    def trainable(self) -> Iterator[tuple[str, torch.nn.Parameter]]: ...

    def autocast(self) -> contextlib.AbstractContextManager: ...

    def describe(self) -> dict:
        """The `backend` block of result.json (without `scoring`)."""
        ...

    def versions(self) -> dict[str, str]:
        """Extra provenance versions (e.g. the model revision)."""
        ...


class PrefixScorer(Protocol):
    device: torch.device

    def prefix(self, ctx_ids: list[int]) -> PrefixState:
        """Run a prompt once and keep its cache for `extend`."""
        ...

    def extend(self, state: PrefixState, paths: torch.Tensor, cols: torch.Tensor,
               carry: Any = None, parent_of: torch.Tensor | None = None) -> tuple[torch.Tensor, Any]:
        """For N continuations `paths` (N, l) of the prompt, log-probabilities (N, len(cols)) of the
        tokens `cols` at the position after each path, all sharing the prompt's cache.

        Prefix-tree walks call this level by level: `carry` is the previous level's carries joined
        with `join_carry`, and `parent_of` (N,) indexes each path's parent (paths[:, :-1]) in it. A
        backend may use them to feed only the last token (tiny) or ignore them and recompute the
        short path (hf). Returns (log-probabilities, this chunk's carry or None)."""
        ...

    def join_carry(self, parts: list[Any]) -> Any: ...


class TreeScorer(Protocol):
    device: torch.device

    def tree_limit(self) -> int:
        """Bytes a scoring group may allocate (`tree_call_bytes`): the memory bound."""
        ...

    def tree_call_bytes(self, probes: int, prompt_len: int, nodes: int) -> int:
        """Bytes a group of `probes` prompts of up to `prompt_len` tokens and their trees of up to
        `nodes` fed nodes each, scored in one `tree_logprobs` call, allocates."""
        ...

    def tree_prompts(self, ctxs: list[list[int]]) -> Any:
        """Run several prompts together and keep their caches for `tree_logprobs`; the state's
        `next_logprobs` is (P, V) float32."""
        ...

    def tree_logprobs(self, prompts: Any, tokens: torch.Tensor, parent: torch.Tensor, depth: torch.Tensor,
                      rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """The trees of every prompt of `tree_prompts` in one call: tokens, parent, depth are
        (P, N), row p being prompt p's nodes: node i is token tokens[p, i] at depth[p, i] below
        the prompt, under node parent[p, i] (-1: the prompt); parents come first; rows may be
        padded with nodes nobody asks about. Returns (M,) log p(cols[m] | the path to node
        rows[m]), rows indexing the flattened (P * N) nodes."""
        ...


class BatchedGreedy(Protocol):
    device: torch.device

    @property
    def pad_id(self) -> int: ...

    def max_positions(self) -> int | None: ...

    def decode(self, ids: list[int]) -> str: ...

    def stop_ids(self) -> set[int]:
        """Tokens that end a greedy continuation."""
        ...

    def greedy_groups(self, lengths: list[int], limits: list[int]) -> list[list[int]]:
        """Rows (by context length and limit) that decode together in one batch."""
        ...

    def greedy_start(self, ctxs: list[list[int]]) -> tuple[torch.Tensor, Any]:
        """Run a batch of contexts: next-token logits (B, V) and the decoding state."""
        ...

    def greedy_step(self, state: Any, tokens: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """Feed one token (B,) per row: next logits (B, V) and the new state."""
        ...

    def greedy_keep(self, state: Any, rows: torch.Tensor) -> Any:
        """The state of only `rows` (finished rows leave the batch)."""
        ...


class Backend(TextModel, TrainableModel, PrefixScorer, BatchedGreedy, Protocol):
    """Every registered backend: text, model, prefix-cache scoring, batched greedy decoding, and
    what it declares about itself."""

    def tree_scorer(self) -> TreeScorer | None:
        """This backend as a token-level tree scorer when tree attention works for the loaded model
        (then any tokenizer is scored by a token-level tree), else None."""
        ...

    def attach_images(self, folder: Path) -> None:
        """The folder image parts' paths are relative to (the run folder); a no-op for a backend
        without image rows."""
        ...

    def project_every_position(self) -> None:
        """Turn `target_logits` off (a sharded model projects every position)."""
        ...


class ModelBackend:
    """The implementations backends share (a backend sets `model`, `device` and its labels)."""

    name: str = ""
    model: torch.nn.Module
    device: torch.device
    dtype_name: str = "float32"
    compute_dtype: torch.dtype = torch.float32
    model_label: str = ""
    revision: str | None = None

    def tokenize(self, text: str) -> list[int]:
        raise NotImplementedError

    def tokenize_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.tokenize(t) for t in texts]

    def end_of_turn(self) -> int | None:
        return None

    def max_positions(self) -> int | None:
        return None

    def autocast(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def join_carry(self, parts: list[Any]) -> Any:
        return None

    def tree_scorer(self) -> TreeScorer | None:
        return None

    def attach_images(self, folder: Path) -> None:
        return None

    def target_logits(self, ids: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        return None

    def project_every_position(self) -> None:
        return None

    def trainable(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        return ((n, p) for n, p in self.model.named_parameters() if p.requires_grad)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "model": self.model_label,
            "revision": self.revision,
            "device": str(self.device),
            "dtype": self.dtype_name,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "trainable_parameters": sum(p.numel() for _, p in self.trainable()),
        }

    def versions(self) -> dict[str, str]:
        return {}
