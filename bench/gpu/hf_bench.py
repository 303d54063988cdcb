"""GPU figures for the hf backend on a random-initialised Qwen3-1.7B-shaped model (one H200).

    PYTHONPATH=trainer-py python3 bench/gpu/hf_bench.py --out "$OUT/hf_bench.json"
    PYTHONPATH=trainer-py python3 bench/gpu/hf_bench.py --vlm qwen25vl --out "$OUT/hf_bench_vlm.json"

Needs torch 2.x with CUDA, transformers 5.x and tokenizers; downloads nothing: the tokenizer is
the real Qwen3 one from the test models' cache (tests/hf_fixtures.py builds it on any machine with
node_modules; carry node_modules/.cache/canary-audit/hf-hub/models--canary-test--tiny-qwen3 to a
GPU machine (--vlm: models--canary-test--tiny-qwen25vl, built by tests/vlm_fixtures.py), or pass
--tokenizer DIR) and the model is built from a config with random weights (vocabulary 151,936 as
in Qwen3, so the output layer costs what it costs in the real model). --hidden/--layers shrink it
for a CPU smoke run (--device cpu).

Measures, in one process:
  * scoring: candidates/s over all 10,000 four-digit codes with the token-level prefix tree (tree
    attention) vs one sequence per candidate (a 1,000-code slice; both are rates), in bf16 under
    autocast; agreement checked in float32 (TF32 off) on a 500-code slice, and the bf16 difference;
  * an evaluation phase: --canaries canaries x 3 probes x 10,000 candidates, scores (probes batched
    across tree-attention calls, as many per call as half the free GPU memory allows) and batched
    greedy (both modes): per run, wall, scoring and greedy seconds, tree groups and calls, peak
    memory (goal <= 10 s on one H200), and where the time goes (PhaseClock): model seconds (device
    time between CUDA events around every decoder and output-projection call; wall time on the
    CPU, where device time is null), the seconds outside them (wall minus model) and the host
    parts (tokenizer calls, the candidates' split, trie building); on a GPU one more run under the
    profiler (CUDA activity only) gives the device's busy time from every kernel and its idle time
    (wall - busy: the device waiting for the host; goal: under 10% of the busy time);
  * training: full fine-tuning tokens/s and target tokens/s (float32 master weights, bf16 autocast,
    AdamW), batch 16, the peak memory of the updates and the trainer's estimate of it (memory.py).
--vlm qwen25vl (vision-language mode, instead of the above): a random-initialised model with
Qwen2.5-VL-7B-Instruct's configuration (text decoder, vision tower and merger, image processor's
pixel limits; --hidden/--layers shrink the decoder, --vision-hidden/--vision-layers the tower) and
its tokenizer and chat template (the test models' tiny-qwen25vl snapshot: Qwen3's vocabulary with
the vision tokens, the Qwen2-VL template), timing one evaluation phase with image probes:
--canaries x 3 probes, each showing its own --image WxH screenshot-sized PNG, each scored over the
10,000 four-digit codes with its image in the prompt, then batched greedy (both modes) with the
images; run twice, per run the same figures as the text phase plus the vision tower's calls,
images encoded while scoring (one per probe) and while decoding, the tower's seconds, the peak
memory (GPU; the process's peak RSS on the CPU) and the trainer's memory estimate (memory.py).
--gpus N (multi-GPU mode, instead of the above): the trainer's own run of one manifest on one GPU
and sharded over N (FSDP2 under torch.distributed.run), twice, interleaved: tokens/s of each and
their ratio, the memory estimate each logged, and the loss-curve and score differences (bf16).
Writes a JSON of figures (date, GPU, versions) to --out and prints it. Exit 1 when the float32
check fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "trainer-py"))

QWEN3_1_7B = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                  rms_norm_eps=1e-6, tie_word_embeddings=True)


# Qwen/Qwen2.5-VL-7B-Instruct (config.json, preprocessor_config.json).
QWEN25_VL_7B_TEXT = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                         num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=128000,
                         max_window_layers=28, rms_norm_eps=1e-6, hidden_act="silu",
                         rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]})
QWEN25_VL_7B_VISION = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                           fullatt_block_indexes=[7, 15, 23, 31], tokens_per_second=2, hidden_act="silu",
                           in_channels=3)
QWEN25_VL_PIXELS = dict(min_pixels=56 * 56, max_pixels=28 * 28 * 16384)  # 3,136 .. 12,845,056
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json",
                   "added_tokens.json", "chat_template.json", "chat_template.jinja")


def sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def peak_gib() -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 1) if torch.cuda.is_available() else None


class PhaseClock:
    """Where an evaluation phase's time goes. Model time: every call of the decoder and of the
    output projection (forward hooks; the top-level forward and the tree-attention decoder call go
    through these two modules), and every call of the tree scorer's tiled head (`hf_tree.tiled_head`:
    256 nodes x 4,096 vocabulary columns per projection, with the online log-sum-exp, timed as
    one), as device time between CUDA events on a
    GPU, as wall time inside the calls on the CPU (device time null there). Outside the model: the
    phase's wall time minus the model time: host work (tokenization, trie building, Python,
    copies) that the device waits for, plus the tensor work outside those modules (the tree
    masks, the log-sum-exp of the prompts' next tokens, greedy's argmax); on a GPU host work that overlaps
    device work does not count. The device's own idle time is the profiled run's (profiled_phase).
    Host parts timed on the host (wall, outermost calls only): every
    tokenizer call of the backend, the candidates' in-context split (`code_token_lists`, its
    tokenizer calls included), and trie building (`trie._Probe`, `trie.build_chunks`)."""

    def __init__(self, b):
        import torch

        from canary_trainer.backends import hf_tree
        from canary_trainer.scoring import scorers
        from canary_trainer.scoring import tree as trie

        self.cuda = b.device.type == "cuda"
        self.parts = {"tokenize": 0.0, "split": 0.0, "trie": 0.0}
        self.cpu_model = 0.0
        self.events: list = []
        self._depth: dict[str, int] = {}
        self._restore: list = []
        self._hooks = []
        modules = [b.base_model.get_decoder(), b.base_model.get_output_embeddings()]
        for m in modules:
            self._hooks.append(m.register_forward_pre_hook(lambda *_: self._start()))
            self._hooks.append(m.register_forward_hook(lambda *_: self._stop()))
        head = hf_tree.tiled_head

        def timed_head(*a, **kw):
            self._start()
            try:
                return head(*a, **kw)
            finally:
                self._stop()

        self._restore.append((hf_tree, "tiled_head", head))
        hf_tree.tiled_head = timed_head
        self._wrap(b, "tokenize", "tokenize")
        self._wrap(b, "tokenize_batch", "tokenize")
        self._wrap(scorers, "code_token_lists", "split")
        self._wrap(trie, "build_chunks", "trie")
        probe_cls, clock = trie._Probe, self

        class TimedProbe(probe_cls):  # type: ignore[misc, valid-type]
            def __init__(self, *a, **kw):
                clock._timed("trie", lambda: probe_cls.__init__(self, *a, **kw))

        self._restore.append((trie, "_Probe", probe_cls))
        trie._Probe = TimedProbe
        self._torch = torch

    def _wrap(self, owner, name: str, part: str) -> None:
        fn = getattr(owner, name)
        self._restore.append((owner, name, fn if not hasattr(owner, "__dict__") or name in vars(owner) else None))
        setattr(owner, name, lambda *a, **kw: self._timed(part, lambda: fn(*a, **kw)))

    def _timed(self, part: str, call):
        depth = self._depth.get(part, 0)
        self._depth[part] = depth + 1
        t0 = time.perf_counter()
        try:
            return call()
        finally:
            self._depth[part] = depth
            if depth == 0:
                self.parts[part] += time.perf_counter() - t0

    def _start(self) -> None:
        if self.cuda:
            e = self._torch.cuda.Event(enable_timing=True)
            e.record()
            self.events.append([e, None])
        else:
            self._t0 = time.perf_counter()

    def _stop(self) -> None:
        if self.cuda:
            e = self._torch.cuda.Event(enable_timing=True)
            e.record()
            self.events[-1][1] = e
        else:
            self.cpu_model += time.perf_counter() - self._t0

    def reset(self) -> None:
        self.parts = dict.fromkeys(self.parts, 0.0)
        self.cpu_model, self.events = 0.0, []

    def report(self, wall: float) -> dict:
        """Seconds of the phase just run (the device synchronised first)."""
        if self.cuda:
            self._torch.cuda.synchronize()
            model = sum(a.elapsed_time(z) for a, z in self.events) / 1000
        else:
            model = self.cpu_model
        outside = wall - model
        return {"model_s": round(model, 3), "device_model_s": round(model, 3) if self.cuda else None,
                "model_calls": len(self.events) if self.cuda else None,
                "outside_model_s": round(outside, 3),
                "outside_over_model": round(outside / model, 3) if model > 0 else None,
                "host_tokenize_s": round(self.parts["tokenize"], 3),
                "host_candidate_split_s": round(self.parts["split"], 3),
                "host_trie_s": round(self.parts["trie"], 3)}

    def close(self) -> None:
        for h in self._hooks:
            h.remove()
        for owner, name, fn in reversed(self._restore):
            if fn is None:  # an instance attribute set over the class's method
                delattr(owner, name)
            else:
                setattr(owner, name, fn)


def busy_seconds(events, device_type) -> float:
    """Seconds during which at least one profiled event of `device_type` ran (the union of their
    intervals: concurrent kernels on several streams count once)."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in events if e.device_type == device_type)
    total, end = 0.0, float("-inf")
    for a, z in spans:
        if z <= end:
            continue
        total += z - max(a, end)
        end = z
    return total / 1e6  # the profiler's times are microseconds


def profiled_phase(ev, phase: str, update: int) -> dict:
    """One more phase under the profiler, CUDA activity only (kernel times from CUPTI): the device's
    busy time (the union of every kernel's interval, all work, not only the model's calls) against
    the wall time; idle = wall - busy is what the device spent waiting for the host. Its wall time
    carries the profiler's overhead, so the unprofiled runs' wall times are the phase's figures."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            wall, _ = timed(lambda: ev.run_phase(phase, update))
        busy = busy_seconds(prof.events(), torch.autograd.DeviceType.CUDA)
    except Exception as exc:  # noqa: BLE001  the other figures stand without this one
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"wall_s": round(wall, 2), "device_busy_s": round(busy, 3), "device_idle_s": round(wall - busy, 3),
            "idle_over_busy": round((wall - busy) / busy, 3) if busy > 0 else None}


def eval_phase(b, spec: dict, tmp: Path, canaries: int) -> dict:
    """One evaluation phase (scores + batched greedy) of `canaries` x 3 probes, run twice (the first
    warms the kernels and the tokenizer caches; the second starts with the caches a run's later
    phases have): per run, wall seconds, the scoring and greedy seconds, the tree-attention groups
    and calls (probes batched across calls by the memory bound), model (device) and host seconds
    (PhaseClock) and the peak GPU memory of that run."""
    import torch

    from canary_trainer.evaluate import Evaluator
    from canary_trainer.events import Events
    from canary_trainer.interrupt import StopFlag
    from canary_trainer.manifest import load_manifest
    from tests.fixtures import make_run

    path = make_run(tmp / "eval", updates=2, batch_size=2, n_focal=canaries, n_held=0, model=spec,
                    training={"device": str(b.device.type)}, max_new_tokens=48)
    ev = Evaluator(b, load_manifest(path), tmp / "eval" / "out", Events(stream=open("/dev/null", "w")), StopFlag())
    runs = []
    clock = PhaseClock(b)
    try:
        for n in range(2):
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            clock.reset()
            wall, entry = timed(lambda n=n: ev.run_phase(f"update-{n}", n))
            runs.append({"wall_s": round(wall, 2), "scoring_s": round(ev.stats["scoring_s"], 2),
                         "greedy_s": round(ev.stats["greedy_s"], 2), "tree_groups": ev.stats["tree_groups"],
                         "tree_calls": ev.stats["tree_calls"], **clock.report(wall), "peak_memory_gib": peak_gib()})
            print(f"evaluation phase run {n + 1}: {json.dumps(runs[-1])}", file=sys.stderr, flush=True)
    finally:
        clock.close()
    profiled = profiled_phase(ev, "update-2", 2) if b.device.type == "cuda" else None
    print(f"evaluation phase, profiled: {json.dumps(profiled)}", file=sys.stderr, flush=True)
    steps = [len(b.tokenize(g["text"])) for p in entry["probes"] for g in p["greedy"].values()]
    return {"probes": len(entry["probes"]), "candidates": entry["probes"][0]["n_candidates"],
            "runs": runs, "profiled_run": profiled, "scoring": ev.scoring, "greedy_tokens_per_decode": round(sum(steps) / len(steps), 1)}


def timed(fn, repeats=1):
    best, value = float("inf"), None
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        value = fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best, value


def tokenizer_dir(given: Path | None, model: str = "tiny-qwen3") -> Path:
    if given:
        return given
    from tests.hf_fixtures import HUB

    snaps = sorted((HUB / f"models--canary-test--{model}" / "snapshots").glob("*"))
    if not snaps:
        raise SystemExit(f"no {model} tokenizer under {HUB}: run the hf tests once, or pass --tokenizer")
    return snaps[-1]


def build_model_dir(folder: Path, args) -> Path:
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir(args.tokenizer)))
    sizes = dict(QWEN3_1_7B)
    if args.layers:
        sizes["num_hidden_layers"] = args.layers
    if args.hidden:
        sizes.update(hidden_size=args.hidden, intermediate_size=3 * args.hidden)
    config = transformers.Qwen3Config(**sizes, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def model_spec(model_dir: Path) -> dict:
    """The manifest's model object for the built model: random weights, bf16, full fine-tuning."""
    return {"backend": "hf", "name": str(model_dir), "revision": None, "init_seed": 0,
            "hf": {"dtype": "bfloat16", "random_init": True, "config_overrides": {},
                   "chat_template_kwargs": {"enable_thinking": False},
                   "trust_remote_code": False, "attn_implementation": None},
            "finetune": {"method": "full"}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("hf_bench.json"))
    ap.add_argument("--layers", type=int, default=None, help="override num_hidden_layers (smoke runs)")
    ap.add_argument("--hidden", type=int, default=None, help="override hidden_size (smoke runs)")
    ap.add_argument("--canaries", type=int, default=64)
    ap.add_argument("--tokenizer", type=Path, default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--per-candidate", type=int, default=1000)
    ap.add_argument("--train-updates", type=int, default=8)
    ap.add_argument("--gpus", type=int, default=0,
                    help="multi-GPU mode: the same run sharded over N GPUs (FSDP2, torch.distributed.run) and on one")
    ap.add_argument("--vlm", default=None, choices=["qwen25vl"],
                    help="vision-language mode: one evaluation phase with image probes on a Qwen2.5-VL-7B-shaped model")
    ap.add_argument("--vision-layers", type=int, default=None,
                    help="--vlm: override the vision tower's depth (smoke runs)")
    ap.add_argument("--vision-hidden", type=int, default=None,
                    help="--vlm: override the vision tower's width (smoke runs)")
    ap.add_argument("--image", default="640x400",
                    help="--vlm: each probe's image, WIDTHxHEIGHT (configs/gui-vlm.yaml: 640x400)")
    args = ap.parse_args()
    if args.gpus > 0:
        return multi_gpu(args)
    if args.vlm:
        return vlm_bench(args)

    import numpy as np
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: this benchmark needs a GPU", file=sys.stderr)
        return 2
    try:
        import transformers
    except ImportError:
        print("transformers is not installed: pip install transformers tokenizers", file=sys.stderr)
        return 2

    from canary_trainer.backends.hf import HfBackend
    from canary_trainer.batches import encode_rows
    from canary_trainer.manifest import exhaustive_codes, load_manifest
    from canary_trainer.rows import read_rows
    from canary_trainer.scoring.tree import code_token_lists, score_trie
    from canary_trainer.scoring.walk import score_per_candidate
    from canary_trainer.train import make_optimizer, train_update
    from tests.fixtures import canary_prefill, canary_prompt, make_run

    figures: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                     "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
                     "torch": torch.__version__,
                     "transformers": transformers.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model_dir(Path(tmp) / "qwen3-1.7b-shape", args)
        spec = model_spec(model_dir)
        t0 = time.perf_counter()
        device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
        b = HfBackend(spec, device)
        figures["build_s"] = round(time.perf_counter() - t0, 1)
        figures["parameters"] = b.describe()["parameters"]

        # ---- scoring -------------------------------------------------------------------------
        b.model.eval()
        identity = "Grace Hopper #3"
        ctx = b.render(canary_prompt(identity, "[redacted]")) + canary_prefill(identity)
        ids = b.tokenize(ctx)
        codes = exhaustive_codes("0123456789", 4)
        check_s, split = timed(lambda: code_token_lists(b, ctx, ids, codes))
        subset = codes[:: len(codes) // args.per_candidate][: args.per_candidate]
        idx = [int(c) for c in subset]
        with torch.no_grad(), b.autocast():
            score_trie(b, ids, split)  # warm-up (kernels, allocator)
            tree_s, fast = timed(lambda: score_trie(b, ids, split), repeats=3)
            score_per_candidate(b, ctx, ids, subset[:100], batch=100)
            per_s, slow = timed(lambda: score_per_candidate(b, ctx, ids, subset, batch=100))
        figures["scoring"] = {
            "prompt_tokens": len(ids), "candidates": len(codes), "split_check_s": round(check_s, 3),
            "tree_s_per_probe": round(tree_s, 4), "tree_candidates_per_s": round(len(codes) / tree_s, 1),
            "per_candidate_candidates_per_s": round(len(subset) / per_s, 1),
            "ratio": round((len(codes) / tree_s) / (len(subset) / per_s), 1),
            "bf16_max_abs_diff": float(np.max(np.abs(fast[idx] - slow))),
        }
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        check = subset[:500]
        with torch.no_grad():  # float32 master weights, no autocast: the exactness check
            fast32 = score_trie(b, ids, split)
            slow32 = score_per_candidate(b, ctx, ids, check, batch=100)
        diff32 = float(np.max(np.abs(fast32[[int(c) for c in check]] - slow32)))
        figures["scoring"]["float32_max_abs_diff"] = diff32
        torch.backends.cuda.matmul.allow_tf32 = True
        figures["evaluation_phase"] = eval_phase(b, spec, Path(tmp), args.canaries)

        # ---- training ------------------------------------------------------------------------
        b.model.train()
        manifest = make_run(Path(tmp) / "run", updates=args.train_updates + 2, batch_size=16,
                            model={**spec, "name": str(model_dir)}, training={"device": "cuda"})
        m = load_manifest(manifest)
        rows = read_rows(m.folder / "rows.jsonl", m.data["rows"]["sha256"], m.data["rows"]["count"], "rows")
        encoded = encode_rows(b, rows, 256, Path("rows.jsonl"))
        opt = make_optimizer(b, dataclasses.replace(m.training, lr=1e-5))
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        times, tokens, targets = [], [], []
        for u in range(args.train_updates + 2):
            sync()
            t0 = time.perf_counter()
            res = train_update(b, opt, encoded, u, dataclasses.replace(m.training, lr=1e-5, loss_explode=1e9))
            sync()
            if u >= 2:
                times.append(time.perf_counter() - t0)
                tokens.append(res.tokens)
                targets.append(res.targets)
        figures["training"] = {
            "batch_rows": 16, "updates_timed": len(times), "tokens_per_row": round(sum(tokens) / len(tokens) / 16, 1),
            "tokens_per_s": round(sum(tokens) / sum(times), 1),
            "target_tokens_per_s": round(sum(targets) / sum(times), 1),
            "updates_per_s": round(len(times) / sum(times), 3),
            "peak_memory_gib": peak_gib(),
            "mode": "full fine-tuning, float32 master weights, bf16 autocast, AdamW",
        }
        # The trainer's estimate of the same updates (memory.py, as a run logs it before loading):
        # state + activations at the longest row, the logits at the largest micro-batch's targets.
        from canary_trainer.memory import estimate, micro_batch_size, micro_targets, model_shape

        micro = micro_batch_size(16)
        est = estimate(model_shape(b.base_model.config), method="full", dtype="bfloat16",
                       on_gpu=device.type == "cuda", micro_batch=micro, seq_len=max(len(e.ids) for e in encoded),
                       target_tokens=micro_targets([e.targets for e in encoded], 16, micro))
        trained = est["weights"] + est["gradients"] + est["optimizer"] + est["activations"]
        figures["training"]["estimate_gib"] = round(trained / 2**30, 1)
        figures["training"]["estimate_parts_gib"] = {k: round(est[k] / 2**30, 2) for k in
                                                     ("weights", "gradients", "optimizer", "activations")}
    text = json.dumps(figures, indent=1)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    if diff32 >= 1e-3:
        print(f"FAIL: float32 prefix tree vs per-candidate differ by {diff32:.2e}", file=sys.stderr)
        return 1
    return 0


# ---- vision-language mode (--vlm) ------------------------------------------------------------------

def qwen25vl_sizes(args) -> tuple[dict, dict]:
    """Qwen2.5-VL-7B's text and vision configs, shrunk by --hidden/--layers (the decoder: heads of
    128, as in the real model, or one head below 128; grouped 7 query heads per key/value head;
    the MLP and the mrope sections in the real proportions) and --vision-hidden/--vision-layers
    (the tower: heads of 80; the full-attention blocks the real ones below the depth, else the last)."""
    text, vision = dict(QWEN25_VL_7B_TEXT), dict(QWEN25_VL_7B_VISION)
    if args.layers:
        text.update(num_hidden_layers=args.layers, max_window_layers=args.layers)
    if args.hidden:
        h = args.hidden
        heads = max(1, h // 128)
        if h % heads or (h // heads) % 16:
            raise SystemExit(f"--hidden {h}: needs a multiple of 128, or under 128 a multiple of 16")
        half = h // heads // 2
        kv = max(1, heads // 7)
        while heads % kv:
            kv -= 1
        text.update(hidden_size=h, intermediate_size=h * 37 // 7, num_attention_heads=heads, num_key_value_heads=kv,
                    rope_parameters={**text["rope_parameters"],
                                     "mrope_section": [half // 4, 3 * half // 8, half - half // 4 - 3 * half // 8]})
    if args.vision_layers:
        d = args.vision_layers
        vision.update(depth=d, fullatt_block_indexes=[i for i in QWEN25_VL_7B_VISION["fullatt_block_indexes"] if i < d]
                      or [d - 1])
    if args.vision_hidden:
        v = args.vision_hidden
        heads = max(1, v // 80)
        if v % heads or (v // heads) % 4:
            raise SystemExit(f"--vision-hidden {v}: needs heads of a multiple of 4 (80 each, or one head below 80)")
        vision.update(hidden_size=v, intermediate_size=v * 3420 // 1280, num_heads=heads)
    vision["out_hidden_size"] = text["hidden_size"]
    return text, vision


def build_vlm_dir(folder: Path, args) -> Path:
    """A model folder like a Qwen2.5-VL-7B snapshot without weights: config, tokenizer, chat
    template (from the tiny-qwen25vl test snapshot, or --tokenizer) and the image processor with
    the real pixel limits."""
    import shutil

    import transformers as tf

    source = args.tokenizer or tokenizer_dir(None, "tiny-qwen25vl")
    folder.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():  # the tokenizer and template files only (never weights, config or processor)
        if f.name in TOKENIZER_FILES:
            shutil.copyfile(f, folder / f.name)
    tok = tf.AutoTokenizer.from_pretrained(str(folder))
    ids = tok.convert_tokens_to_ids
    text, vision = qwen25vl_sizes(args)
    config = tf.Qwen2_5_VLConfig(
        text_config={**text, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}, vision_config=vision,
        tie_word_embeddings=False, image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"))
    config.pad_token_id = tok.pad_token_id
    config.save_pretrained(folder)
    image = tf.Qwen2VLImageProcessorPil(**QWEN25_VL_PIXELS, patch_size=14, merge_size=2, temporal_patch_size=2)
    image.save_pretrained(folder)
    return folder


def screenshot_probes(manifest: Path, size: tuple[int, int]) -> None:
    """Give every probe its own size[0] x size[1] image (its id and text drawn on it; the source box
    kept), listed in the manifest: a screenshot's pixel count per probe, no two probes sharing one."""
    import hashlib

    from tests.vision_fixtures import png

    data = json.loads(manifest.read_text())
    listed = {ref["path"]: ref for ref in data["images"]}
    for probe in data["probes"]:
        for msg in probe["prompt"]:
            if isinstance(msg["content"], str):
                continue
            text = " ".join(p["text"] for p in msg["content"] if p["type"] == "text")
            for part in msg["content"]:
                if part["type"] != "image":
                    continue
                raw = png(f"{probe['id']}: {text}", size)
                sha = hashlib.sha256(raw).hexdigest()
                path = f"images/{sha}.png"
                (manifest.parent / path).write_bytes(raw)
                listed[path] = {"path": path, "sha256": sha, "bytes": len(raw)}
                part.update(path=path, sha256=sha, width=size[0], height=size[1])
    data["images"] = [listed[p] for p in sorted(listed)]
    manifest.write_text(json.dumps(data, indent=1))


def probe_images(probes: list[dict]) -> list[str]:
    """The image paths the probes show, in order (one per image part)."""
    return [part["path"] for p in probes for msg in p["prompt"] if not isinstance(msg["content"], str)
            for part in msg["content"] if part["type"] == "image"]


class VisionClock:
    """The vision tower's share of a phase: every call of the backend's image encoder (tower and
    merger), the images it encoded while scoring and while greedy decoding (greedy_many), and its
    seconds (device time between CUDA events on a GPU, wall time on the CPU)."""

    def __init__(self, b):
        import torch

        from canary_trainer import evaluate

        self.vision, self.cuda, self._torch = b.vision, b.device.type == "cuda", torch
        self.part = "scoring"
        self.reset()
        features = self._features = b.vision._features
        greedy = self._greedy = evaluate.greedy_many

        def timed_features(slots):
            self.calls[self.part] += 1
            self.images[self.part] += len(slots)
            if self.cuda:
                a = torch.cuda.Event(enable_timing=True)
                z = torch.cuda.Event(enable_timing=True)
                a.record()
                out = features(slots)
                z.record()
                self.events.append((a, z))
                return out
            t0 = time.perf_counter()
            try:
                return features(slots)
            finally:
                self.cpu_s += time.perf_counter() - t0

        def marked_greedy(*a, **kw):
            self.part = "greedy"
            try:
                return greedy(*a, **kw)
            finally:
                self.part = "scoring"

        b.vision._features = timed_features
        evaluate.greedy_many = marked_greedy
        self._evaluate = evaluate

    def reset(self) -> None:
        self.calls = {"scoring": 0, "greedy": 0}
        self.images = {"scoring": 0, "greedy": 0}
        self.events: list = []
        self.cpu_s = 0.0

    def report(self) -> dict:
        if self.cuda:
            self._torch.cuda.synchronize()
            seconds = sum(a.elapsed_time(z) for a, z in self.events) / 1000
        else:
            seconds = self.cpu_s
        return {"vision_calls_scoring": self.calls["scoring"], "images_encoded_scoring": self.images["scoring"],
                "vision_calls_greedy": self.calls["greedy"], "images_encoded_greedy": self.images["greedy"],
                "vision_s": round(seconds, 3)}

    def close(self) -> None:
        self.vision.__dict__.pop("_features", None)
        self._evaluate.greedy_many = self._greedy


def host_peak_gib() -> float:
    """The process's peak resident memory so far (Linux: ru_maxrss in KiB); it never goes down."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)


def vlm_bench(args) -> int:
    """One evaluation phase with image probes on a random-initialised Qwen2.5-VL-7B-shaped model."""
    import torch
    import transformers

    from canary_trainer.backends.hf import HfBackend
    from canary_trainer.evaluate import Evaluator
    from canary_trainer.events import Events
    from canary_trainer.interrupt import StopFlag
    from canary_trainer.manifest import load_manifest
    from canary_trainer.memory import check_fits, estimate, model_shape
    from tests.vision_fixtures import make_vision_run

    if args.vlm != "qwen25vl":
        print(f"--vlm {args.vlm}: only qwen25vl is built", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: this benchmark needs a GPU (or --device cpu for a smoke run)", file=sys.stderr)
        return 2
    width, height = (int(x) for x in args.image.lower().split("x"))
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    figures: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                     "gpu": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
                     "torch": torch.__version__, "transformers": transformers.__version__, "vlm": args.vlm}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_vlm_dir(Path(tmp) / "qwen2.5-vl-7b-shape", args)
        text, vision = qwen25vl_sizes(args)
        figures["config"] = {"text": {k: text[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                           "num_key_value_heads", "vocab_size")},
                             "vision": {k: vision[k] for k in ("hidden_size", "depth", "num_heads")},
                             "image": [width, height]}
        spec = {**model_spec(model_dir), "hf": {**model_spec(model_dir)["hf"], "chat_template_kwargs": {}}}
        manifest = make_vision_run(Path(tmp) / "eval", updates=2, batch_size=2, n_focal=args.canaries, n_held=0,
                                   model=spec, training={"device": device.type}, max_new_tokens=48)
        screenshot_probes(manifest, (width, height))
        m = load_manifest(manifest)  # checks every image against the processor's pixel limits
        est = check_fits(m, device)  # the estimate a run logs before loading (none on a model it cannot read)
        t0 = time.perf_counter()
        b = HfBackend(spec, device)
        b.attach_images(m.folder)
        figures["build_s"] = round(time.perf_counter() - t0, 1)
        described = b.describe()
        figures["parameters"] = described["parameters"]
        figures["vision_parameters"] = model_shape(b.base_model.config).vision_params
        ev = Evaluator(b, m, Path(tmp) / "eval" / "out", Events(stream=open("/dev/null", "w")), StopFlag())
        probes = m.data["probes"]
        prompts = [b.tokenize(b.render(p["prompt"]) + p["prefill"]) for p in probes]
        shown = probe_images(probes)
        image_tokens = sorted({b.vision.image_tokens(path) for path in shown})
        runs = []
        clock, vclock = PhaseClock(b), VisionClock(b)
        try:
            for n in range(2):
                if torch.cuda.is_available():
                    torch.cuda.reset_peak_memory_stats()
                clock.reset()
                vclock.reset()
                wall, entry = timed(lambda n=n: ev.run_phase(f"update-{n}", n))
                runs.append({"wall_s": round(wall, 2), "scoring_s": round(ev.stats["scoring_s"], 2),
                             "greedy_s": round(ev.stats["greedy_s"], 2), "tree_groups": ev.stats["tree_groups"],
                             "tree_calls": ev.stats["tree_calls"], **clock.report(wall), **vclock.report(),
                             "peak_memory_gib": peak_gib(), "host_peak_rss_gib": host_peak_gib()})
                print(f"vlm evaluation phase run {n + 1}: {json.dumps(runs[-1])}", file=sys.stderr, flush=True)
        finally:
            vclock.close()
            clock.close()
        profiled = profiled_phase(ev, "update-2", 2) if device.type == "cuda" else None
        steps = [len(b.tokenize(g["text"])) for p in entry["probes"] for g in p["greedy"].values()]
        eval_est = estimate(model_shape(b.base_model.config), method="full", dtype=spec["hf"]["dtype"],
                            on_gpu=device.type == "cuda", micro_batch=1, seq_len=max(len(p) for p in prompts),
                            score_nodes=m.eval["score_batch_size"])
        gib = lambda x: round(x / 2**30, 2)  # noqa: E731
        figures["evaluation_phase"] = {
            "probes": len(entry["probes"]), "candidates": entry["probes"][0]["n_candidates"],
            "probe_kinds": sorted({p["kind"] for p in probes}), "decode": sorted(entry["probes"][0]["greedy"]),
            "image_tokens_per_probe": image_tokens, "prompt_tokens_max": max(len(p) for p in prompts),
            "distinct_probe_images": len(set(shown)),
            "runs": runs, "profiled_run": profiled, "scoring": ev.scoring,
            "greedy_tokens_per_decode": round(sum(steps) / len(steps), 1),
            "one_image_encoding_per_probe_while_scoring": all(r["images_encoded_scoring"] == len(probes) for r in runs),
        }
        figures["memory_estimate"] = {
            "run_gib": {k: gib(v) for k, v in est.items() if k != "trainable"} if est else None,
            "evaluation_gib": {"weights": gib(eval_est["weights"]), "scoring": gib(eval_est["scoring"]),
                               "weights_plus_scoring": gib(eval_est["weights"] + eval_est["scoring"]),
                               "at_prompt_tokens": max(len(p) for p in prompts)},
            "note": "run_gib: what a training run of this manifest logs (scoring sized at training.max_length); "
                    "evaluation_gib: the weights and one scoring call at the longest probe prompt. memory.py "
                    "sizes no working memory for the vision tower's forward pass (a frozen tower keeps no "
                    "activations, but encoding a group's images is transient memory); the measured peak shows it",
        }
    text_out = json.dumps(figures, indent=1)
    print(text_out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text_out + "\n")
    ok = figures["evaluation_phase"]["one_image_encoding_per_probe_while_scoring"]
    if not ok:
        print("FAIL: scoring encoded a number of images other than one per probe", file=sys.stderr)
    return 0 if ok else 1


def multi_gpu(args) -> int:
    """The trainer's own run, end to end, on one GPU and sharded over --gpus N (FSDP2 under
    torch.distributed.run, as the worker starts it), of the same manifest rows: training tokens/s
    and wall seconds of each, their ratio, peak memory per GPU from the trainer's log, and how far
    the loss curves and scores of the two runs are apart. Runs the pair twice, interleaved
    (one, N, one, N), and reports each figure per round."""
    import subprocess

    import numpy as np
    import torch

    from tests.fixtures import make_run

    if args.device != "cuda" or torch.cuda.device_count() < args.gpus:
        print(f"multi-GPU mode needs {args.gpus} CUDA devices; found {torch.cuda.device_count()}", file=sys.stderr)
        return 2
    figures: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                     "gpu": torch.cuda.get_device_name(0), "gpus": args.gpus, "torch": torch.__version__, "rounds": []}
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT / "trainer-py"), "CANARY_TRAINER_PARENT_WATCH": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model_dir(Path(tmp) / "qwen3-1.7b-shape", args)
        spec = model_spec(model_dir)
        kw = dict(updates=args.train_updates, batch_size=16, model=spec, checkpoint_every=max(1, args.train_updates),
                  length=4, n_focal=2, n_held=1, kinds=("hidden",), decode=("prefill",), max_new_tokens=8)
        manifests = {1: make_run(Path(tmp) / "one", training={"device": "cuda"}, **kw),
                     args.gpus: make_run(Path(tmp) / "many", training={"device": "cuda", "gpus": args.gpus,
                                                                        "parallel": "fsdp"}, **kw)}
        for round_ in range(2):
            row = {}
            for n, manifest in manifests.items():
                out = Path(tmp) / f"out-{n}-{round_}"
                launch = ["-m", "canary_trainer"] if n == 1 else \
                    ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n), "-m", "canary_trainer"]
                t0 = time.perf_counter()
                proc = subprocess.run([sys.executable, *launch, "run", "--manifest", str(manifest), "--out", str(out)],
                                      capture_output=True, text=True, env={**env, "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(n)))})
                wall = time.perf_counter() - t0
                if proc.returncode != 0:
                    print(proc.stderr[-4000:], file=sys.stderr)
                    return 1
                result = json.loads((out / "result.json").read_text())
                estimate = [line for line in proc.stderr.splitlines() if "memory estimate" in line]
                row[n] = {"wall_s": round(wall, 1), "tokens_per_s": result["training"]["tokens_per_s"],
                          "train_wall_s": result["training"]["wall_s"], "memory_estimate": estimate[-1] if estimate else None,
                          "curve": [p[1] for p in result["training"]["loss_curve"]],
                          "scores": {p["probe_id"]: np.fromfile(out / p["scores_file"], dtype="<f4")
                                     for p in result["evaluations"][-1]["probes"]}}
            one, many = row[1], row[args.gpus]
            figures["rounds"].append({
                "one_gpu": {k: one[k] for k in ("wall_s", "tokens_per_s", "train_wall_s", "memory_estimate")},
                f"{args.gpus}_gpus": {k: many[k] for k in ("wall_s", "tokens_per_s", "train_wall_s", "memory_estimate")},
                "tokens_per_s_ratio": round(many["tokens_per_s"] / one["tokens_per_s"], 3),
                "loss_curve_max_abs_diff": float(np.max(np.abs(np.array(one["curve"]) - np.array(many["curve"])))),
                "scores_max_abs_diff": float(max(np.max(np.abs(one["scores"][k] - many["scores"][k])) for k in one["scores"])),
            })
    text = json.dumps(figures, indent=1)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
