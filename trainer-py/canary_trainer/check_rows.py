"""Token lengths of rows under a Hugging Face model's tokenizer and chat template, without loading
its weights: the controller asks this at plan time, so a row longer than the model reads is an
error in the grid rather than a failed run after the queue wait.

  python -m canary_trainer.check_rows --model MODEL.json --rows ROWS.jsonl --max-length N

MODEL.json is the manifest's `model` object (name, revision, hf); ROWS.jsonl holds {prompt, target}
per line, counted exactly as training counts them (the rendered prompt and reply). Prints one JSON
object: {"rows", "limit", "longest", "over": [{"i", "tokens"}] (at most 5), "over_count"} (and
"image_refused": why, for the first image size the model's image processor would not take as it
is: hf_config.image_limit_problem), or
{"skipped": why} when the model's tokenizer is not on this machine. Exit 0 either way; 2 on bad
arguments. Several models in one process (transformers imported once): repeat the three options,
one output line per model, in order.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .backends.hf_load import import_transformers, load_tokenizer_and_config
from .backends.hf_text import HfText
from .backends.hf_vision import Vision, chat_template, message_parts
from .errors import TrainerError
from .hf_config import image_limit_problem, image_limits, is_vision_config


class _Text(HfText):
    def __init__(self, tokenizer: Any, template_kwargs: dict) -> None:
        self.tokenizer = tokenizer
        self.template_kwargs = dict(template_kwargs)


def count(model: dict, rows: list[dict], max_length: int) -> dict:
    tf = import_transformers()
    hf = model["hf"]
    load_kw = {"revision": model.get("revision"), "local_files_only": True, "trust_remote_code": hf.get("trust_remote_code", False)}
    tokenizer, config = load_tokenizer_and_config(tf, model, load_kw)
    text = _Text(tokenizer, hf.get("chat_template_kwargs") or {})
    refused = None
    if is_vision_config(config):  # image parts count as the image tokens their sizes give
        text.chat_template = chat_template(model, tokenizer)
        text.vision = Vision(tf, model, config, tokenizer, load_kw)
        text.vision.sizes = {p["path"]: (p["width"], p["height"]) for r in rows for p in message_parts(r["prompt"])}
        limits = image_limits(model)
        refused = next(filter(None, (image_limit_problem(model, w, h, limits)
                                     for w, h in sorted(set(text.vision.sizes.values())))), None)
    config = config.get_text_config()
    positions = getattr(config, "max_position_embeddings", None)
    limit = min(max_length, positions) if positions else max_length
    lengths = [len(ids) for ids in text.tokenize_batch([text.render(r["prompt"], r["target"]) for r in rows])] if rows else []
    over = [{"i": i, "tokens": n} for i, n in enumerate(lengths) if n > limit]
    over.sort(key=lambda o: -o["tokens"])
    out = {"rows": len(rows), "limit": limit, "longest": max(lengths, default=0), "over": over[:5], "over_count": len(over)}
    return out | {"image_refused": refused} if refused else out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m canary_trainer.check_rows", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, type=Path, action="append")
    p.add_argument("--rows", required=True, type=Path, action="append")
    p.add_argument("--max-length", required=True, type=int, action="append")
    args = p.parse_args(argv)
    if not len(args.model) == len(args.rows) == len(args.max_length):
        p.error("give --model, --rows and --max-length once per model to count")
    for model_path, rows_path, max_length in zip(args.model, args.rows, args.max_length):
        model = json.loads(model_path.read_text(encoding="utf-8"))
        rows = [json.loads(line) for line in rows_path.read_text(encoding="utf-8").splitlines() if line.strip()]
        try:
            out = count(model, rows, max_length)
        except TrainerError as exc:  # the model or its tokenizer is not here, or this transformers lacks it
            out = {"skipped": str(exc)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
