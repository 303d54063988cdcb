"""The `hf` backend: a transformers causal LM with its tokenizer and chat template.

Loaded only from a local folder or the Hugging Face cache (local_files_only: a run never
downloads), or built with random weights from the model's config (tests, benchmarks). Full
fine-tuning keeps float32 master weights and computes in the manifest's dtype under autocast on
GPU; LoRA (peft) freezes the base in that dtype and trains float32 adapters.

Works with transformers 4.45+ and 5.x: chat templates are rendered to text (tokenize=False, whose
return type did not change between versions) and tokenized separately; the prompt cache is
copied per candidate chunk with the Cache API (`batch_repeat_interleave`).
"""

from __future__ import annotations

import contextlib
import copy
import inspect

import torch
import torch.nn.functional as F

from ..errors import BadManifest, MissingDependency, MissingModel
from .base import Backend, PrefixState

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def _import_transformers():
    try:
        import transformers
    except ImportError as exc:
        raise MissingDependency(f"the hf backend needs transformers ({exc}); fix: pip install transformers "
                                "(and peft for LoRA) in the trainer's Python, or use the tiny backend")
    return transformers


def _repeat_cache(cache, n: int):
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


class HfBackend(Backend):
    name = "hf"

    def __init__(self, spec: dict, device: torch.device):
        tf = _import_transformers()
        hf = spec["hf"]
        self.spec = spec
        self.device = device
        self.model_label = spec["name"]
        self.template_kwargs = dict(hf["chat_template_kwargs"])
        compute = _DTYPES[hf["dtype"]]
        if device.type == "cpu" and compute != torch.float32:
            compute = torch.float32  # CPU autocast in half precision is slow and imprecise
        self.compute_dtype = compute
        self.dtype_name = str(compute).replace("torch.", "")
        lora = spec["finetune"]["method"] == "lora"
        load_kw = {"revision": spec.get("revision"), "local_files_only": True,
                   "trust_remote_code": hf["trust_remote_code"]}
        try:
            self.tokenizer = tf.AutoTokenizer.from_pretrained(spec["name"], **load_kw)
            config = tf.AutoConfig.from_pretrained(spec["name"], **load_kw)
        except (OSError, ValueError) as exc:
            raise MissingModel(f"model {spec['name']!r} (revision {spec.get('revision')}) is neither a local folder "
                               f"nor in the Hugging Face cache: {str(exc).splitlines()[0]}; fix: download it first "
                               "(huggingface-cli download NAME --revision REV) or give a local path")
        self.revision = getattr(config, "_commit_hash", None) or spec.get("revision")
        # Weights that train stay float32 (master copy); a frozen LoRA base sits in the compute dtype.
        weights_dtype = compute if lora else torch.float32
        extra = {}
        if hf["attn_implementation"]:
            extra["attn_implementation"] = hf["attn_implementation"]
        if hf["random_init"]:
            for key, value in hf["config_overrides"].items():
                setattr(config, key, value)
            torch.manual_seed(spec["init_seed"])
            # torch 2.x: allocate (and initialise) directly on the device; 1.x builds on the CPU.
            place = torch.device(device) if hasattr(torch.device, "__enter__") else contextlib.nullcontext()
            with place:
                model = tf.AutoModelForCausalLM.from_config(config, trust_remote_code=hf["trust_remote_code"], **extra)
            model = model.to(device=device, dtype=weights_dtype)
        else:
            dtype_kw = "dtype" if _version_at_least(tf.__version__, (4, 56)) else "torch_dtype"
            try:
                model = tf.AutoModelForCausalLM.from_pretrained(spec["name"], **load_kw, **extra,
                                                                **{dtype_kw: weights_dtype})
            except OSError as exc:
                raise MissingModel(f"weights of {spec['name']!r} are not available locally: "
                                   f"{str(exc).splitlines()[0]}; fix: download the model first")
            model = model.to(device)
        self.base_model = model
        if lora:
            model = self._wrap_lora(model, spec["finetune"])
        self.model = model
        self.model.train()
        fwd = inspect.signature(self.base_model.forward).parameters
        self._keep_arg = next((a for a in ("logits_to_keep", "num_logits_to_keep") if a in fwd), None)
        self._pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else \
            (self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0)
        self._stop = self._stop_tokens()

    # ---- setup --------------------------------------------------------------------------------
    def _wrap_lora(self, model, ft: dict):
        try:
            import peft
        except ImportError as exc:
            raise MissingDependency(f"LoRA needs peft ({exc}); fix: pip install peft, or use finetune.method full")
        cfg = peft.LoraConfig(r=ft["r"], lora_alpha=ft.get("alpha", 2 * ft["r"]), lora_dropout=ft.get("dropout", 0.0),
                              target_modules=ft.get("target_modules") or None, task_type="CAUSAL_LM")
        try:
            wrapped = peft.get_peft_model(model, cfg)
        except ValueError as exc:
            raise BadManifest(f"model.finetune: peft cannot apply LoRA to this model ({exc}); "
                              "fix: set model.finetune.target_modules")
        for p in wrapped.parameters():
            if p.requires_grad:
                p.data = p.data.float()
        return wrapped

    def _stop_tokens(self) -> set[int]:
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
            stop.add(full[len(pre)])
        return stop

    # ---- text ---------------------------------------------------------------------------------
    def render(self, messages, target=None):
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            if target is None:
                return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                               **self.template_kwargs)
            return tok.apply_chat_template(messages + [{"role": "assistant", "content": target}], tokenize=False,
                                           **self.template_kwargs)
        # No template (a base model): a plain, visible format.
        text = (tok.bos_token or "") + "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
        if target is not None:
            text += target + (tok.eos_token or "")
        return text

    def tokenize(self, text):
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def tokenize_batch(self, texts):
        return [list(x) for x in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def decode(self, ids):
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    @property
    def pad_id(self) -> int:
        return self._pad

    def max_positions(self):
        return getattr(self.base_model.config, "max_position_embeddings", None)

    def autocast(self):
        if self.device.type == "cuda" and self.compute_dtype != torch.float32:
            return torch.autocast(device_type="cuda", dtype=self.compute_dtype)
        return contextlib.nullcontext()

    def versions(self):
        out = {"model": self.model_label}
        if self.revision:
            out["model_revision"] = str(self.revision)
        return out

    # ---- model --------------------------------------------------------------------------------
    def _keep(self, n: int | None) -> dict:
        return {self._keep_arg: n} if (self._keep_arg and n is not None) else {}

    def logits(self, ids, keep_last=None):
        out = self.model(input_ids=ids, use_cache=False, **self._keep(keep_last)).logits
        return out if keep_last is None else out[:, out.shape[1] - keep_last:]

    def prefix(self, ctx_ids):
        ids = torch.tensor([ctx_ids], dtype=torch.long, device=self.device)
        out = self.model(input_ids=ids, use_cache=True, **self._keep(1))
        return PrefixState(out.past_key_values, len(ctx_ids), F.log_softmax(out.logits[0, -1].float(), dim=-1))

    def extend(self, state, paths, cols, carry=None, parent_of=None):
        # Each chunk gets its own copy of the prompt cache and recomputes its (short) path: no
        # per-level cache bookkeeping inside transformers' Cache classes.
        n, length = paths.shape
        cache = _repeat_cache(state.cache, n)
        mask = torch.ones(n, state.length + length, dtype=torch.long, device=self.device)
        out = self.model(input_ids=paths, past_key_values=cache, attention_mask=mask, use_cache=True, **self._keep(1))
        return F.log_softmax(out.logits[:, -1].float(), dim=-1).index_select(1, cols), None

    def greedy(self, ctx_ids, max_new_tokens):
        limit = max_new_tokens
        if self.max_positions():
            limit = min(limit, self.max_positions() - len(ctx_ids))
        ids = torch.tensor([ctx_ids], dtype=torch.long, device=self.device)
        out = self.model(input_ids=ids, use_cache=True, **self._keep(1))
        generated: list[int] = []
        for _ in range(max(limit, 0)):
            nxt = int(torch.argmax(out.logits[0, -1]))
            if nxt in self._stop:
                break
            generated.append(nxt)
            if len(generated) == limit:
                break
            step = torch.tensor([[nxt]], dtype=torch.long, device=self.device)
            out = self.model(input_ids=step, past_key_values=out.past_key_values, use_cache=True, **self._keep(1))
        return generated


def _version_at_least(version: str, wanted: tuple[int, int]) -> bool:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts) >= wanted
