"""Peak device memory of an hf run, estimated from the model's config before any weight is loaded,
so a run that cannot fit its GPU is refused in seconds (with what would fit) instead of failing
hours later.

Bytes per parameter P (A: LoRA adapter parameters, c: compute dtype size, 2 for bfloat16):
- full fine-tuning: float32 master weights 4P, float32 gradients 4P, AdamW's two moments 8P (the
  classic 16 bytes per parameter), plus autocast's half-precision copies of the weights cP on GPU;
- LoRA: the frozen base in the compute dtype cP, float32 adapters with gradients and moments 16A.
Activations kept for backward, per token and layer: about 10 hidden + 2 key/value + 4 MLP-width
values in the compute dtype (norm, projection and MLP inputs and outputs); with gradient
checkpointing only each layer's input (plus one layer recomputed). The logits add
positions x vocabulary x (c + 8) bytes (float32 copy and its gradient), where positions are the
micro-batch's target positions: training gathers the decoder's hidden states there before the
output projection (backends/hf.py `target_logits`). Every position instead when the run is
sharded (FSDP2 unshards the output matrix only in the root module's forward, which the gather
skips), when the model's head does more than the output projection (soft-capping, logit scaling),
or when the rows' target lengths are not known (`row_targets` not given). The rows' bound is each
row's reply tokens (rendered prompt + target minus the rendered prompt; the loss stops at the end
of turn, so the targets are at most that), summed over each micro-batch, the largest taken. Scoring (`tree_call_bytes`,
the same formula that sizes the scoring groups of backends/hf_tree.py) keeps each probe's prompt
cache once, one layer's keys/values of prompt + tree nodes at a time, per-node working values,
masks (and attention scores under eager attention), and a block of HEAD_ROWS x VOCAB_TILE logits; the
estimate counts its smallest call, one probe with a chunk of eval.score_batch_size nodes. The
estimate uses training.max_length for every row and every prompt (an upper bound) and keeps 10%
of the device for the CUDA context and fragmentation.

A vision-language model (Qwen2.5-VL, Gemma 3): P counts the vision tower and projector too (V of
them). Frozen (the default), the tower's weights are held but train nothing: full fine-tuning
keeps their float32 copy (4V, and the autocast copy cV) without gradients or optimizer state, LoRA
puts no adapters there; a frozen tower runs without autograd, so it keeps no activations. With
model.hf.train_vision the tower trains like the rest (16 bytes per parameter under full
fine-tuning, adapters on its target modules under LoRA). Image tokens are ids of the row
(backends/hf_vision.py), so training.max_length, which bounds every row's ids, bounds them as well:
the sequence length the activations and the scoring prompts are sized by includes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

from .errors import OutOfMemory
from .events import log
from .host import host
from .manifest import Manifest

GIB = 1024 ** 3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
USABLE = 0.9
DEFAULT_LORA = ["q_proj", "v_proj"]
HEAD_ROWS = 256  # tree nodes per block of the scoring pass's vocabulary projection
VOCAB_TILE = 4096  # vocabulary columns per chunk of that projection (online log-sum-exp)


@dataclass
class Shape:
    params: int
    vocab: int
    hidden: int
    layers: int
    mlp_width: int  # per-token MLP width computed (mixture of experts: experts per token x expert width)
    kv_dim: int  # key/value heads x head dim
    lora_io: int  # sum of in + out features of the LoRA target modules (adapter params = r x lora_io)
    heads: int = 1  # attention (query) heads
    q_dim: int = 0  # attention heads x head dim
    mask_kinds: int = 1  # attention masks of a scoring call: 2 when some layers have a sliding window
    eager: bool = True  # attention scores materialised (eager attention; False: SDPA kernels)
    plain_head: bool = True  # logits = output projection of the last hidden state (no soft-capping or scaling)
    vision_params: int = 0  # a vision-language model's vision tower and projector (part of params)
    train_vision: bool = False  # the tower trains (model.hf.train_vision); else it is frozen


def plain_head(text_config: Any) -> bool:
    """False when the config names a head that does more than project (Gemma 2's final-logit
    soft-capping, Cohere's logit_scale, Granite's logits_scaling): training then projects every
    position (backends/hf.py checks the head itself once the weights are loaded)."""
    if getattr(text_config, "final_logit_softcapping", None):
        return False
    return all(getattr(text_config, name, None) in (None, 1, 1.0) for name in ("logit_scale", "logits_scaling"))


def config_shape(config: Any, params: int = 0, lora_io: int = 0) -> Shape:
    """The sizes the estimates need, read from a model config (parameters as given). A config not
    yet loaded into a model names no attention implementation: counted as eager (the larger)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    experts = getattr(text, "num_experts_per_tok", None) or 1
    width = getattr(text, "moe_intermediate_size", None) or text.intermediate_size
    kinds = set(getattr(text, "layer_types", None) or ["full_attention"])
    return Shape(params=params, vocab=text.vocab_size, hidden=text.hidden_size, layers=text.num_hidden_layers,
                 mlp_width=experts * width, kv_dim=(getattr(text, "num_key_value_heads", None) or heads) * head_dim,
                 lora_io=lora_io, heads=heads, q_dim=heads * head_dim, mask_kinds=len(kinds),
                 eager=getattr(config, "_attn_implementation", None) != "sdpa", plain_head=plain_head(text))


def model_shape(config: Any, target_modules: list[str] | None = None, attn_implementation: str | None = None,
                train_vision: bool = False) -> Shape:
    """Counts parameters exactly by building the model on the meta device (no memory, no weights);
    the attention implementation is the one transformers resolves for it (or the one asked for).
    A vision-language model (a config with a vision_config) is built as the image-text-to-text
    model the backend loads; its vision modules' parameters are counted apart, and a frozen
    tower's modules take no LoRA adapters."""
    import transformers as tf

    from .hf_config import is_vision_config, vision_modules

    extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
    vision = is_vision_config(config)
    auto = tf.AutoModelForImageTextToText if vision else tf.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config, **extra)
    tower = vision_modules(model) if vision else {}
    frozen = () if train_vision else tuple(tower)
    targets = set(target_modules or DEFAULT_LORA)
    lora_io = sum(m.in_features + m.out_features for name, m in model.named_modules()
                  if isinstance(m, torch.nn.Linear) and name.rsplit(".", 1)[-1] in targets
                  and not any(name == f or name.startswith(f + ".") for f in frozen))
    shape = config_shape(model.config, params=sum(p.numel() for p in model.parameters()), lora_io=lora_io)
    shape.vision_params = sum(p.numel() for m in tower.values() for p in m.parameters())
    shape.train_vision = train_vision
    return shape


def tree_call_bytes(shape: Shape, *, probes: int, prompt_len: int, nodes: int, c: int) -> dict[str, int]:
    """Bytes of one tree-attention scoring group (backends/hf_tree.py): `probes` prompts of up to
    `prompt_len` tokens run together (left-padded), then their trees in one call with `nodes` fed
    nodes per probe (padded to the largest tree), in a compute dtype of `c` bytes.

    - prompt_cache: every prompt's keys/values, once per probe, held by the group;
    - prompt_pass: running the prompts: one layer's working values per token (MLP width, hidden
      and attention projections), the attention over the prompt, the next-token logits;
    - tree_pass: one layer at a time (the prompt cache is read, never copied or repeated per node):
      the keys/values of prompt + nodes as the layer concatenates them, and their repeat to the
      query heads; per node the layer's working values, and per node and key the masks (float32
      for eager attention, boolean plus the kernel's converted copy for SDPA, one per mask kind,
      and the boolean temporaries that build them), the ancestor matrix, and with eager attention
      the scores (the scores, their float32 softmax and the copies between); SDPA kernels stream
      the scores in blocks;
    - head: the blocked output projection, HEAD_ROWS nodes x VOCAB_TILE vocabulary columns at a
      time (logits and the log-sum-exp's exponentials in float32), and the last hidden states with
      their compacted copy.
    peak = prompt_cache + max(prompt_pass, tree_pass + head)."""
    p, n, s = probes, nodes, shape
    keys = prompt_len + n
    kv = 2 * (s.kv_dim + s.q_dim)
    work = 3 * s.mlp_width + 4 * s.hidden + 2 * s.q_dim  # one layer's working values per token
    scores = s.heads * (2 * c + 8) if s.eager else 0  # per query and key
    masks = s.mask_kinds * (4 if s.eager else 1 + 2 * c) + 2  # per query and key
    parts = {"prompt_cache": p * prompt_len * s.layers * 2 * s.kv_dim * c,
             "prompt_pass": p * prompt_len * ((work + kv) * c + prompt_len * (scores + masks)) + p * s.vocab * (c + 8),
             "tree_pass": p * keys * kv * c + p * n * (work * c + keys * (scores + masks) + n),
             "head": min(HEAD_ROWS, p * n) * min(VOCAB_TILE, s.vocab) * (8 if c == 4 else c + 8) + 2 * p * n * s.hidden * c}
    parts["peak"] = parts["prompt_cache"] + max(parts["prompt_pass"], parts["tree_pass"] + parts["head"])
    return parts


def estimate(shape: Shape, *, method: str, dtype: str, on_gpu: bool, micro_batch: int, seq_len: int,
             lora_r: int = 16, checkpointing: bool = False, score_nodes: int = 1024, ranks: int = 1,
             target_tokens: int | None = None) -> dict[str, int]:
    """Bytes per component and their sum ("peak"), on each of `ranks` devices. `target_tokens`: the
    target positions of the largest micro-batch (None: unknown); the vocabulary is projected there
    only on one rank with a plain head, else at every position (the module docstring says why).

    ranks > 1 (FSDP2, training.gpus): parameters, gradients and optimizer state are sharded, 1/ranks
    on each device (full fine-tuning: float32 master weights, gradients and AdamW moments; LoRA: the
    frozen base in the compute dtype and the float32 adapters). A device also holds what FSDP
    gathers unsharded in the compute dtype: two decoder layers (the one computing, the next one
    prefetched) and the embedding/output matrices ("gathered"). Evaluation runs on rank 0 on the
    whole model gathered there in the compute dtype ("eval_copy"), next to its shard; it does not
    shrink with more ranks."""
    c = DTYPE_BYTES[dtype] if on_gpu else 4  # the CPU computes in float32
    p = shape.params
    if method == "full":
        trained = p if shape.train_vision else p - shape.vision_params  # a frozen tower: no gradients, no moments
        # Sharded runs keep the compute-dtype copy in "gathered" (one layer at a time), not whole.
        parts = {"weights": 4 * p + (c * p if c < 4 and ranks == 1 else 0), "gradients": 4 * trained,
                 "optimizer": 8 * trained}
    else:
        trained = lora_r * shape.lora_io
        parts = {"weights": c * p + 4 * trained, "gradients": 4 * trained, "optimizer": 8 * trained}
    if ranks > 1:
        for key in ("weights", "gradients", "optimizer"):
            parts[key] = -(-parts[key] // ranks)
        embed = shape.vocab * shape.hidden
        layer = max(0, p - 2 * embed) // max(1, shape.layers)
        parts["gathered"] = c * (2 * layer + 2 * embed)
        parts["eval_copy"] = c * p
    tokens = micro_batch * seq_len
    per_layer = 10 * shape.hidden + 2 * shape.kv_dim + 4 * shape.mlp_width
    kept = shape.layers * shape.hidden + per_layer if checkpointing else shape.layers * per_layer
    positions = tokens
    if target_tokens is not None and ranks == 1 and shape.plain_head:
        positions = min(tokens, target_tokens)
    logits = positions * shape.vocab * (c + 8)
    parts["activations"] = tokens * kept * c + logits
    # Scoring groups grow to the memory bound at run time; what must fit is one probe's prompt and
    # a tree chunk of score_nodes nodes.
    parts["scoring"] = tree_call_bytes(shape, probes=1, prompt_len=seq_len, nodes=score_nodes, c=c)["peak"]
    # Scoring runs between updates: it shares the device with everything but the activations.
    state = parts["weights"] + parts["gradients"] + parts["optimizer"]
    if ranks > 1:
        parts["peak"] = state + max(parts["gathered"] + parts["activations"], parts["eval_copy"] + parts["scoring"])
    else:
        parts["peak"] = state + max(parts["activations"], parts["scoring"])
    parts["trainable"] = trained
    return parts


MAX_RANKS = 64


def ranks_needed(fits: Callable[[int], bool], limit: int = MAX_RANKS) -> int | None:
    """The fewest ranks (GPUs of one host) for which `fits(ranks)` holds, or None up to `limit`."""
    for ranks in range(1, limit + 1):
        if fits(ranks):
            return ranks
    return None


def _gib(n: float) -> str:
    return f"{n / GIB:.1f}"


def describe(parts: dict[str, int], ranks: int = 1) -> str:
    per = f" per GPU of {ranks} (FSDP)" if ranks > 1 else ""
    sharded = (f", gathered layers {_gib(parts['gathered'])}, rank 0's evaluation copy {_gib(parts['eval_copy'])}"
               if "gathered" in parts else "")
    return (f"{_gib(parts['peak'])} GiB peak{per} (weights {_gib(parts['weights'])}, gradients {_gib(parts['gradients'])}, "
            f"optimizer {_gib(parts['optimizer'])}, activations {_gib(parts['activations'])}, "
            f"scoring {_gib(parts['scoring'])}{sharded})")


def refusal(parts: dict[str, int], device_bytes: int, device: str, alternatives: dict[str, dict],
            ranks: int = 1) -> str | None:
    """The one-line refusal when `parts` cannot fit `device_bytes`, naming each alternative with its
    estimate (and whether it fits); None when it fits. An alternative named `training.gpus: N` is
    the fewest GPUs of this size the run needs sharded."""
    usable = device_bytes * USABLE
    if parts["peak"] <= usable:
        return None
    options = ", ".join(f"{what} ({_gib(alt['peak'])} GiB{' per GPU' if 'gathered' in alt else ''}"
                        f"{', fits' if alt['peak'] <= usable else ''})"
                        for what, alt in alternatives.items())
    return (f"estimated {describe(parts, ranks)} exceeds the {_gib(usable)} GiB usable of {device} "
            f"({_gib(device_bytes)} GiB); fix: {options}, or a device with more memory")


def micro_targets(row_targets: list[int] | None, batch_size: int, micro: int) -> int | None:
    """The most target tokens of one micro-batch: rows in order, `batch_size` per update, each
    update's rows cut into micro-batches of `micro` (train.train_update); None when not known."""
    if row_targets is None:
        return None
    most = 0
    for u in range(0, len(row_targets), batch_size):
        update = row_targets[u: u + batch_size]
        for s in range(0, len(update), micro):
            most = max(most, sum(update[s: s + micro]))
    return most


def plan(shape: Shape, manifest_model: Mapping[str, Any], training: Mapping[str, Any], score_nodes: int, on_gpu: bool, micro_batch: int,
         checkpointing: bool, device_bytes: int | None = None,
         row_targets: list[int] | None = None) -> tuple[dict, dict[str, dict]]:
    """This run's estimate (per GPU of training.gpus) and the alternatives a refusal offers; with
    the device's size, the fewest GPUs of that size this run fits on sharded. `row_targets`: a bound
    of each row's target tokens, in row order (None: the logits are counted at every position)."""
    ft = manifest_model["finetune"]
    ranks = int(training.get("gpus", 1))
    batch = int(training["batch_size"])
    kw = dict(dtype=manifest_model["hf"]["dtype"], on_gpu=on_gpu, seq_len=training["max_length"],
              lora_r=ft.get("r", 16), score_nodes=score_nodes,
              target_tokens=micro_targets(row_targets, batch, micro_batch))
    mine = estimate(shape, method=ft["method"], micro_batch=micro_batch, checkpointing=checkpointing, ranks=ranks, **kw)
    alts: dict[str, dict] = {}
    if device_bytes is not None and mine["peak"] > device_bytes * USABLE:
        sharded = lambda n: estimate(shape, method=ft["method"], micro_batch=micro_batch,  # noqa: E731
                                     checkpointing=checkpointing, ranks=n, **kw)
        need = ranks_needed(lambda n: n > ranks and sharded(n)["peak"] <= device_bytes * USABLE)
        if need is not None:
            alts[f"training.gpus: {need}"] = sharded(need)
    kw = {**kw, "ranks": ranks}
    if ft["method"] == "full":
        alts["model.finetune.method lora r=16"] = estimate(shape, method="lora", micro_batch=micro_batch,
                                                            checkpointing=checkpointing, **{**kw, "lora_r": 16})
    if not checkpointing:
        alts["CANARY_TRAINER_GRADIENT_CHECKPOINTING=1"] = estimate(shape, method=ft["method"],
                                                                   micro_batch=micro_batch, checkpointing=True, **kw)
    if micro_batch > 1:
        alts["CANARY_TRAINER_MICRO_BATCH=1"] = estimate(
            shape, method=ft["method"], micro_batch=1, checkpointing=checkpointing,
            **{**kw, "target_tokens": micro_targets(row_targets, batch, 1)})
    return mine, alts


def device_memory(device: torch.device) -> int | None:
    """Bytes of the device, or None for the CPU. CANARY_TRAINER_DEVICE_MEMORY_GB overrides it (a
    shared GPU, tests)."""
    forced = host().device_memory_gb
    if forced is not None:
        return int(forced * GIB)
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return None


def check_fits(manifest: Manifest, device: torch.device,
               row_targets: Callable[[], list[int] | None] | None = None) -> dict[str, int] | None:
    """Log the estimate of an hf run and refuse it (OutOfMemory) when it cannot fit the device.
    `row_targets`: reads a bound of each training row's target tokens (backends.reply_tokens); called
    only where the estimate counts the logits at the targets (one rank, a plain head), since reading
    it renders and tokenizes every row."""
    model = manifest.model
    if model["backend"] != "hf":
        return None
    try:
        import transformers as tf

        config = tf.AutoConfig.from_pretrained(model["name"], revision=model.get("revision"), local_files_only=True,
                                               trust_remote_code=model["hf"]["trust_remote_code"])
        if model["hf"]["random_init"]:
            for key, value in model["hf"]["config_overrides"].items():
                setattr(config, key, value)
        shape = model_shape(config, model["finetune"].get("target_modules"), model["hf"].get("attn_implementation"),
                            bool(model["hf"].get("train_vision", False)))
    except Exception as exc:  # noqa: BLE001  loading the backend reports what is wrong with the model
        log(f"memory estimate skipped: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        return None
    total = device_memory(device)
    ranks = manifest.training.gpus
    if ranks > 1:  # each rank runs its own share of the update's micro-batches
        micro = micro_size(manifest.training.batch_size, ranks)
    else:
        micro = micro_batch_size(manifest.training.batch_size)
    mine, alts = plan(shape, model, manifest.training.as_dict(), manifest.eval["score_batch_size"],
                      on_gpu=device.type == "cuda" or total is not None,
                      micro_batch=micro, checkpointing=gradient_checkpointing(), device_bytes=total,
                      row_targets=row_targets() if row_targets is not None and ranks == 1 and shape.plain_head else None)
    log(f"memory estimate: {describe(mine, ranks)}" + (f" of {_gib(total)} GiB on {device}" if total else ""))
    problem = refusal(mine, total, str(device), alts, ranks) if total else None
    if problem:
        raise OutOfMemory(problem)
    return mine


def micro_size(batch_size: int, world: int) -> int:
    """Rows per micro-batch of one rank of a sharded run (each rank takes its share of an update)."""
    env = host().micro_batch
    return max(1, min(batch_size, env)) if env is not None else max(1, math.ceil(batch_size / world))


def micro_batch_size(batch_size: int) -> int:
    """Rows per forward pass (CANARY_TRAINER_MICRO_BATCH, a host setting): less memory, the same
    update (train.py divides every micro-batch by the whole batch's target tokens)."""
    env = host().micro_batch
    return max(1, min(batch_size, env)) if env is not None else batch_size


def gradient_checkpointing() -> bool:
    return host().gradient_checkpointing


def main(argv: list[str] | None = None) -> int:
    """`python -m canary_trainer.memory CONFIG.json --method full --gpus 8 --device-gib 131.3`: the
    estimate for a model config (a transformers config.json, no weights) on N GPUs of a size, and
    the refusal (with the GPUs it would need) when it does not fit. Prints what a run logs."""
    import argparse
    import json

    import transformers as tf

    ap = argparse.ArgumentParser(prog="python -m canary_trainer.memory")
    ap.add_argument("config", help="a transformers config.json (e.g. from a model's Hub snapshot)")
    ap.add_argument("--method", choices=["full", "lora"], default="full")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--gpus", type=int, default=1, help="training.gpus (FSDP ranks)")
    ap.add_argument("--device-gib", type=float, required=True, help="memory of one GPU, GiB (H200: 131.3)")
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPE_BYTES))
    ap.add_argument("--max-length", type=int, default=1024)
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--score-nodes", type=int, default=1024, help="eval.score_batch_size")
    ap.add_argument("--checkpointing", action="store_true", help="activation checkpointing")
    ap.add_argument("--target-tokens", type=int, default=None,
                    help="target tokens per row (the loss positions; default: the logits at every position)")
    args = ap.parse_args(argv)
    data = json.loads(open(args.config).read())
    config = tf.AutoConfig.for_model(**data)
    shape = model_shape(config)
    device_bytes = int(args.device_gib * GIB)
    model = {"hf": {"dtype": args.dtype}, "finetune": {"method": args.method, "r": args.lora_r}}
    training = {"max_length": args.max_length, "batch_size": args.micro_batch, "gpus": args.gpus}
    targets = None if args.target_tokens is None else [args.target_tokens] * args.micro_batch
    mine, alts = plan(shape, model, training, args.score_nodes, on_gpu=True, micro_batch=args.micro_batch,
                      checkpointing=args.checkpointing, device_bytes=device_bytes, row_targets=targets)
    print(f"{shape.params:,} parameters; memory estimate: {describe(mine, args.gpus)} of {_gib(device_bytes)} GiB")
    problem = refusal(mine, device_bytes, f"one {args.device_gib:g} GiB GPU", alts, args.gpus)
    print(f"refused: {problem}" if problem else "fits")
    return 1 if problem else 0


if __name__ == "__main__":
    raise SystemExit(main())
