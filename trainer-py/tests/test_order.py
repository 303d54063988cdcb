"""Rows are trained in exactly the manifest's order: update i consumes rows [i*B, (i+1)*B); loss is
on target tokens only; a prompt that is not a token prefix of prompt+target is refused."""


import pytest
import torch

from canary_trainer.backends.tiny import TinyBackend
from canary_trainer.batches import IGNORE, batch_rows, collate, encode_row
from canary_trainer.checkpoint import checkpoint_dir
from canary_trainer.errors import BadRows
from canary_trainer.events import Events
from canary_trainer.manifest import load_manifest
from canary_trainer.rows import read_rows
from canary_trainer.run import RunOptions, run
from canary_trainer.train import target_loss_sum

from .fixtures import make_run

SPEC = {"backend": "tiny", "name": "t", "init_seed": 0,
        "tiny": {"n_layer": 1, "n_head": 2, "d_model": 32, "max_len": 256, "dropout": 0.0}}


def test_batch_rows_windows():
    assert list(batch_rows(0, 4)) == [0, 1, 2, 3]
    assert list(batch_rows(3, 4)) == [12, 13, 14, 15]


def test_each_update_consumes_its_window_and_its_loss_is_that_window(tmp_path):
    manifest = make_run(tmp_path / "run", updates=6, batch_size=3, checkpoint_every=1, length=2, n_focal=1,
                        n_held=0, kinds=("hidden",))
    seen, steps = [], []
    run(RunOptions(manifest=manifest, out=tmp_path / "out", on_batch=lambda u, rows: seen.append((u, list(rows))),
                   events=Events(stream=open("/dev/null", "w"), observer=lambda e: steps.append(e) if e["event"] == "step" else None)))
    assert seen == [(u, [3 * u, 3 * u + 1, 3 * u + 2]) for u in range(6)]

    # The last update's reported loss is the loss of the weights before it (checkpoint 5) on rows
    # 15..17, and not on any other window: the order is observable in the numbers, not only in a hook.
    m = load_manifest(manifest)
    rows = read_rows(m.folder / "rows.jsonl", m.data["rows"]["sha256"], m.data["rows"]["count"], "rows")
    backend = TinyBackend(m.model, torch.device("cpu"))
    weights = torch.load(checkpoint_dir(tmp_path / "out", 5) / "weights.pt")
    backend.model.load_state_dict(weights)
    backend.model.eval()

    def window_loss(first):
        items = [encode_row(backend, rows[i], 256, "t") for i in range(first, first + 3)]
        ids, labels = collate(items, backend.pad_id)
        with torch.no_grad():
            return float(target_loss_sum(backend, ids, labels)) / sum(e.targets for e in items)

    reported = steps[-1]["loss"]
    assert abs(window_loss(15) - reported) < 1e-5
    assert all(abs(window_loss(first) - reported) > 1e-4 for first in (0, 3, 6, 9, 12))


def test_labels_mask_everything_but_the_target():
    backend = TinyBackend(SPEC, torch.device("cpu"))
    row = {"prompt": [{"role": "user", "content": "hello"}], "target": "abc"}
    enc = encode_row(backend, row, 256, "t")
    trained = [t for t in enc.labels if t != IGNORE]
    assert backend.tokenizer.decode(trained) == "abc"  # plus the end-of-turn marker, not decoded
    assert len(trained) == 4 and enc.labels[: len(enc.labels) - 4] == [IGNORE] * (len(enc.labels) - 4)


class ShiftyBackend(TinyBackend):
    """A chat format that renders earlier turns differently once a reply follows (here: no newline
    between turns), as some real chat templates do: the prompt is then no token prefix."""

    def render(self, messages, target=None):
        text = super().render(messages, target)
        return text if target is None else text.replace("<|end|>\n", "<|end|>", 1)


def test_prompt_prefix_failure_names_the_row():
    backend = ShiftyBackend(SPEC, torch.device("cpu"))
    row = {"prompt": [{"role": "user", "content": "hello"}], "target": "abc"}
    with pytest.raises(BadRows, match=r"rows.jsonl:8:1 \(row 7\): the rendered prompt is not a token prefix"):
        encode_row(backend, row, 256, "rows.jsonl:8:1 (row 7)")


def test_padding_is_only_to_the_longest_row_of_the_batch():
    backend = TinyBackend(SPEC, torch.device("cpu"))
    a = encode_row(backend, {"prompt": [{"role": "user", "content": "x"}], "target": "y"}, 256, "a")
    b = encode_row(backend, {"prompt": [{"role": "user", "content": "xxxx"}], "target": "yy"}, 256, "b")
    ids, labels = collate([a, b], backend.pad_id)
    assert ids.shape == (2, len(b.ids))
    # Right padding never changes a row's logits (causal attention): same loss alone or batched.
    alone_ids, alone_labels = collate([a], backend.pad_id)
    with torch.no_grad():
        batched = target_loss_sum(backend, ids[:1], labels[:1])
        alone = target_loss_sum(backend, alone_ids, alone_labels)
    assert abs(float(batched) - float(alone)) < 1e-5
