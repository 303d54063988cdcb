"""The `hf` backend: a transformers causal LM with its tokenizer and chat template.

Loaded only from a local folder or the Hugging Face cache (local_files_only: a run never
downloads), or built with random weights from the model's config (tests, benchmarks). Full
fine-tuning keeps float32 master weights and computes in the manifest's dtype under autocast on
GPU; LoRA (peft) freezes the base in that dtype and trains float32 adapters.

Works with transformers 4.45+ and 5.x: chat templates are rendered to text (tokenize=False, whose
return type did not change between versions) and tokenized separately. Candidate scoring uses
tree attention over the shared prompt caches of several probes at once (hf_tree); `extend` (a
level-by-level walk that copies the prompt cache per chunk with `batch_repeat_interleave`) remains
for callers of score_tree.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import re
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ..errors import BadManifest, MissingDependency
from ..hf_config import is_vision_config, vision_modules
from ..memory import gradient_checkpointing
from . import hf_greedy, hf_tree
from .base import IGNORE, ModelBackend, PrefixState
from .hf_load import DTYPES, check_precision, import_transformers, load_tokenizer_and_config, load_weights
from .hf_text import HfText
from .hf_vision import Vision, chat_template


def _repeat_cache(cache: Any, n: int) -> Any:
    """A copy of a batch-1 prompt cache repeated to batch n."""
    if isinstance(cache, tuple):  # legacy per-layer (key, value) tuples
        return tuple(tuple(t.repeat_interleave(n, dim=0) for t in layer) for layer in cache)
    c = copy.deepcopy(cache)
    if hasattr(c, "batch_repeat_interleave"):
        c.batch_repeat_interleave(n)
    else:  # a Cache exposing only its layers
        for layer in c.layers:
            layer.batch_repeat_interleave(n)
    return c


class HfBackend(HfText, ModelBackend):
    name = "hf"

    def __init__(self, spec: dict, device: torch.device):
        tf = import_transformers()
        hf = spec["hf"]
        check_precision(hf)
        self.spec = spec
        self.device = device
        self.model_label = spec["name"]
        self.template_kwargs = dict(hf["chat_template_kwargs"])
        compute = DTYPES[hf["dtype"]]
        if device.type == "cpu" and compute != torch.float32:
            compute = torch.float32  # CPU autocast in half precision is slow and imprecise
        self.compute_dtype = compute
        self.dtype_name = str(compute).replace("torch.", "")
        lora = spec["finetune"]["method"] == "lora"
        load_kw = {"revision": spec.get("revision"), "local_files_only": True,
                   "trust_remote_code": hf["trust_remote_code"]}
        self.tokenizer, config = load_tokenizer_and_config(tf, spec, load_kw)
        self.vision: Vision | None = None
        if is_vision_config(config):  # a vision-language model: its processor's template and images
            self.chat_template = chat_template(spec, self.tokenizer)
            self.vision = Vision(tf, spec, config, self.tokenizer, load_kw)
        self.train_vision = bool(hf.get("train_vision", False))
        if self.train_vision and self.vision is None:
            raise BadManifest(f"model.hf.train_vision: {self.model_label!r} is a text-only model (its config has no "
                              "vision_config), so it has no vision tower to train; fix: remove train_vision")
        self._check_template()
        self.revision = getattr(config, "_commit_hash", None) or spec.get("revision")
        # Weights that train stay float32 (master copy); a frozen LoRA base sits in the compute dtype.
        weights_dtype = compute if lora else torch.float32
        extra = {"attn_implementation": hf["attn_implementation"]} if hf["attn_implementation"] else {}
        model = load_weights(tf, spec, config, device, weights_dtype, extra, vision=self.vision is not None)
        self.text_config = model.config.get_text_config()
        if self.vision is not None:
            self.vision.model = model
            if not self.train_vision:  # the vision tower (and projector) frozen: no gradient, no optimizer state
                for module in vision_modules(model).values():
                    module.requires_grad_(False)
        if gradient_checkpointing():  # a host setting: less memory, same arithmetic, more compute
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.base_model = model
        if lora:
            model = self._wrap_lora(model, spec["finetune"])
        self.model = model
        self.model.train()
        fwd = inspect.signature(self.base_model.forward).parameters
        self._keep_arg = next((a for a in ("logits_to_keep", "num_logits_to_keep") if a in fwd), None)
        self._pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else \
            (self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0)
        self._turn_end: int | None = None
        self._gather_ok: bool | None = None  # target_logits: does head(decoder(x)) equal the model's logits?
        # memory bound of a tree-attention call or a greedy batch (None: from the device)
        self.mem_bytes: int | None = None
        self._stop = self._stop_tokens()

    # ---- setup --------------------------------------------------------------------------------
    def _wrap_lora(self, model: Any, ft: dict) -> Any:
        try:
            import peft
        except ImportError as exc:
            raise MissingDependency(f"LoRA needs peft ({exc}); fix: pip install peft, or use finetune.method full") from exc
        # A vision-language model's tower gets no adapters unless model.hf.train_vision.
        exclude = None
        if self.vision is not None and not self.train_vision:
            names = "|".join(re.escape(n) for n in vision_modules(model))
            exclude = rf"({names})(\..*)?"
        cfg = peft.LoraConfig(r=ft["r"], lora_alpha=ft.get("alpha", 2 * ft["r"]), lora_dropout=ft.get("dropout", 0.0),
                              target_modules=ft.get("target_modules") or None, task_type="CAUSAL_LM",
                              **({"exclude_modules": exclude} if exclude else {}))
        # The adapters' random initialisation (lora_A) comes from the manifest, not from whatever
        # the process's random stream holds: two runs of one manifest start from the same adapters.
        torch.manual_seed(self.spec["init_seed"])
        try:
            wrapped = peft.get_peft_model(model, cfg)
        except ValueError as exc:
            raise BadManifest(f"model.finetune: peft cannot apply LoRA to this model ({exc}); "
                              "fix: set model.finetune.target_modules") from exc
        for p in wrapped.parameters():
            if p.requires_grad:
                p.data = p.data.float()
        return wrapped

    def _stop_tokens(self) -> set[int]:
        """Every id that ends a greedy continuation: the tokenizer's eos, each eos of the model's
        generation config (Llama 3 lists three), and the chat template's end-of-turn marker."""
        stop = set()
        for value in (self.tokenizer.eos_token_id, getattr(getattr(self.base_model, "generation_config", None),
                                                           "eos_token_id", None)):
            if isinstance(value, int):
                stop.add(value)
            elif isinstance(value, (list, tuple)):
                stop.update(v for v in value if isinstance(v, int))
        # The chat template's end-of-turn marker: the first token after a reply.
        msgs = [{"role": "user", "content": "hi"}]
        pre = self.tokenize(self.render(msgs) + "ok")
        full = self.tokenize(self.render(msgs, "ok"))
        if full[: len(pre)] == pre and len(full) > len(pre):
            self._turn_end = full[len(pre)]
            stop.add(self._turn_end)
        return stop

    def _check_template(self) -> None:
        """Training renders prompt + reply, scoring renders the prompt with the assistant turn
        opened and appends the code: both must put the reply right after the same prompt text. A
        template that inserts text before a stored reply (Qwen3's empty thinking block when
        enable_thinking is not false) would train one context and score another."""
        msgs = [{"role": "user", "content": "hi"}]
        prompt, full = self.render(msgs), self.render(msgs, "ok")
        if full.startswith(prompt) and full[len(prompt):].startswith("ok"):
            return
        inserted = full[len(prompt): full.find("ok", len(prompt))] if full.startswith(prompt) else None
        what = (f"inserts {inserted!r} between the assistant turn's opening and the reply when training, but "
                "scoring continues right after the opening" if inserted is not None else
                "renders the conversation's start differently once a reply is added")
        hint = ("set model.hf.chat_template_kwargs.enable_thinking: false (Qwen3's empty thinking block)"
                if inserted is not None and "think" in inserted else
                "choose model.hf.chat_template_kwargs (or a model) whose template puts the reply right after "
                "the generation prompt")
        raise BadManifest(f"model.hf.chat_template_kwargs {self.template_kwargs}: the chat template of "
                          f"{self.model_label!r} {what}, so training and scoring would see different contexts; "
                          f"fix: {hint}")

    def end_of_turn(self) -> int | None:
        return self._turn_end

    @property
    def pad_id(self) -> int:
        return self._pad

    def max_positions(self) -> int | None:
        return getattr(self.text_config, "max_position_embeddings", None)

    def attach_images(self, folder: Path) -> None:
        """The folder image parts' paths are relative to (the run folder); vision models only."""
        if self.vision is not None:
            self.vision.root = folder

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.device.type == "cuda" and self.compute_dtype != torch.float32:
            return torch.autocast(device_type="cuda", dtype=self.compute_dtype)
        return contextlib.nullcontext()

    def versions(self) -> dict[str, str]:
        out = {"model": self.model_label}
        if self.revision:
            out["model_revision"] = str(self.revision)
        return out

    # ---- model --------------------------------------------------------------------------------
    def _keep(self, n: int | None) -> dict:
        return {self._keep_arg: n} if (self._keep_arg and n is not None) else {}

    def _inputs(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[dict, torch.Tensor | None]:
        """The forward's inputs for ids: plain input_ids (and mask) for a text model; a vision model's
        embedded images and explicit positions, with each row's position offset."""
        if self.vision is None:
            return {"input_ids": ids, **({"attention_mask": mask} if mask is not None else {})}, None
        return self.vision.inputs(ids, mask)

    def _hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """The decoder's last hidden states (B, T, H) of right-padded ids."""
        if self.vision is None:
            return self.base_model.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state
        kw, _ = self.vision.inputs(ids, None)
        return self.base_model.model(**kw, use_cache=False).last_hidden_state

    def logits(self, ids: torch.Tensor, keep_last: int | None = None) -> torch.Tensor:
        kw, _ = self._inputs(ids)
        out = self.model(**kw, use_cache=False, **self._keep(keep_last)).logits
        return out if keep_last is None else out[:, out.shape[1] - keep_last:]

    def target_logits(self, ids: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(logits (N, V), targets (N,)) at the N target positions of a right-padded batch (in row
        order, then position order): the decoder's hidden states are gathered at those positions
        before the output projection, so the vocabulary is projected where the loss is and nowhere
        else. None (the caller projects every position) for a model whose causal-LM head does more
        than the output embedding (logit scaling, soft-capping: checked once on a short input)."""
        if self._gather_ok is None:
            self._gather_ok = self._gather_matches(ids[:1, : min(ids.shape[1], 8)])
        if not self._gather_ok:
            return None
        keep = labels[:, 1:] != IGNORE
        hidden = self._hidden(ids)
        return self.base_model.get_output_embeddings()(hidden[:, :-1][keep]), labels[:, 1:][keep]

    def project_every_position(self) -> None:
        """Turn off the gather before the output projection: a sharded (FSDP2) model unshards its
        root parameters in the root module's forward only, which the decoder-only call skips."""
        self._gather_ok = False

    @torch.no_grad()
    def _gather_matches(self, ids: torch.Tensor) -> bool:
        was_training = self.model.training
        self.model.eval()
        try:
            full = self.logits(ids).float()
            hidden = self._hidden(ids)
            mine = self.base_model.get_output_embeddings()(hidden).float()
        except (AttributeError, NotImplementedError, TypeError, ValueError):
            return False
        finally:
            self.model.train(was_training)
        tol = 1e-3 if self.compute_dtype != torch.float32 else 1e-5
        return mine.shape == full.shape and bool(torch.allclose(mine, full, rtol=tol, atol=tol))

    def prefix(self, ctx_ids: list[int]) -> PrefixState:
        ids = torch.tensor([ctx_ids], dtype=torch.long, device=self.device)
        kw, offsets = self._inputs(ids)
        out = self.model(**kw, use_cache=True, **self._keep(1))
        state = PrefixState(out.past_key_values, len(ctx_ids), F.log_softmax(out.logits[0, -1].float(), dim=-1))
        state.offset = 0 if offsets is None else int(offsets[0])  # type: ignore[attr-defined]
        return state

    def extend(self, state: PrefixState, paths: torch.Tensor, cols: torch.Tensor, carry: Any = None,
               parent_of: torch.Tensor | None = None) -> tuple[torch.Tensor, Any]:
        # Each chunk gets its own copy of the prompt cache and recomputes its (short) path: no
        # per-level cache bookkeeping inside transformers' Cache classes.
        n, length = paths.shape
        cache = _repeat_cache(state.cache, n)
        mask = torch.ones(n, state.length + length, dtype=torch.long, device=self.device)
        pos = {}
        if self.vision is not None:  # explicit positions: after an image they are not the cache length
            start = state.length + getattr(state, "offset", 0)
            pos = {"position_ids": torch.arange(start, start + length, device=self.device)[None].expand(n, -1)}
        out = self.model(input_ids=paths, past_key_values=cache, attention_mask=mask, use_cache=True, **pos,
                         **self._keep(1))
        return F.log_softmax(out.logits[:, -1].float(), dim=-1).index_select(1, cols), None

    def tree_scorer(self) -> HfBackend | None:
        return self if hf_tree.supports(self.text_config) else None

    def tree_limit(self) -> int:
        return hf_tree.memory_limit(self.device, self.mem_bytes)

    def tree_call_bytes(self, probes: int, prompt_len: int, nodes: int) -> int:
        try:
            autocast = torch.is_autocast_enabled(self.device.type)
        except TypeError:  # torch < 2.4: CUDA only
            autocast = self.device.type == "cuda" and torch.is_autocast_enabled()
        dtype = self.compute_dtype if autocast else next(self.base_model.parameters()).dtype
        return hf_tree.call_bytes(self.text_config, torch.empty((), dtype=dtype).element_size(), probes,
                                  prompt_len, nodes)

    def tree_prompts(self, ctxs: list[list[int]]) -> Any:
        inputs = None if self.vision is None else self.vision.inputs
        return hf_tree.run_prompts(self.model, self._keep(1), ctxs, self._pad, self.device, inputs)

    def tree_logprobs(self, prompts: Any, tokens: torch.Tensor, parent: torch.Tensor, depth: torch.Tensor,
                      rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        if not isinstance(prompts, hf_tree.TreePrompts):  # one probe's PrefixState, nodes (N,)
            lengths = torch.tensor([prompts.length], device=self.device)
            offsets = torch.tensor([getattr(prompts, "offset", 0)], device=self.device)
            prompts = hf_tree.TreePrompts(prompts.cache, lengths, prompts.length, prompts.next_logprobs[None],
                                          offsets if self.vision is not None else None)
            tokens, parent, depth = tokens[None], parent[None], depth[None]
        return hf_tree.run_tree(self.base_model, self.text_config, prompts, tokens, parent, depth, rows, cols)

    def stop_ids(self) -> set[int]:
        return set(self._stop)

    def greedy_groups(self, lengths: list[int], limits: list[int]) -> list[list[int]]:
        return hf_greedy.groups(self.text_config, self.device, lengths, limits, self.mem_bytes)

    def greedy_start(self, ctxs: list[list[int]]) -> tuple[torch.Tensor, Any]:
        inputs = None if self.vision is None else self.vision.inputs
        return hf_greedy.start(self.model, self._keep(1), ctxs, self._pad, self.device, inputs)

    def greedy_step(self, state: Any, tokens: torch.Tensor) -> tuple[torch.Tensor, Any]:
        return hf_greedy.step(self.model, state, tokens)

    def greedy_keep(self, state: Any, rows: torch.Tensor) -> Any:
        return hf_greedy.keep(state, rows)
