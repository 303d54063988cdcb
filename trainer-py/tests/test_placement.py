"""Decided once: where training lives (placement.py) and which scorer scores (scoring/scorers.py).
Pure checks on a tiny model; the sharded path runs in tests/test_fsdp.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from canary_trainer.backends.tiny import TinyBackend
from canary_trainer.errors import BadManifest
from canary_trainer.placement import Single, place
from canary_trainer.scoring import PER_CANDIDATE, PREFIX_TREE
from canary_trainer.scoring.scorers import CharacterTrees, PerCandidate, TokenTrees, choose_scorer
from canary_trainer.scoring.walk import score_per_candidate
from canary_trainer.train_config import TrainingConfig

CPU = torch.device("cpu")
SPEC = {"backend": "tiny", "name": "t", "init_seed": 3,
        "tiny": {"n_layer": 1, "n_head": 2, "d_model": 32, "max_len": 128, "dropout": 0.0}}
TRAINING = TrainingConfig(lr=1e-3, schedule={"kind": "constant", "warmup_updates": 0, "min_lr_ratio": 0.0},
                          batch_size=2, updates=2, max_length=64, seed=0, weight_decay=0.0, betas=(0.9, 0.999),
                          grad_clip=1.0, checkpoint_every=2, loss_explode=1e9, device="cpu")


def test_one_process_is_single_and_its_collectives_do_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    p = place(TRAINING, CPU, tmp_path, "sha")
    assert isinstance(p, Single) and p.main and p.whole_weights and p.device == CPU
    assert p.agree(True) is True and p.agree(False) is False
    assert p.barrier() is None
    b = TinyBackend(SPEC, CPU)
    trained, scorer = p.models(lambda: b)
    assert trained is scorer is b  # one model trains and scores
    p.gather(trained, scorer)
    p.close()


def test_a_launch_that_disagrees_with_the_manifest_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(BadManifest, match="started as 2 ranks but the manifest has no training.gpus"):
        place(TRAINING, CPU, tmp_path, "sha")


def test_single_checkpoints_round_trip_and_a_fresh_start_clears(tmp_path):
    b = TinyBackend(SPEC, CPU)
    opt = torch.optim.AdamW([q for _, q in b.trainable()], lr=1e-3)
    p = Single(tmp_path, "sha", CPU)
    cleared = []
    opened = p.open(True, lambda: cleared.append(1))
    assert opened.saved is None and cleared == [1]
    p.save(2, b, opt, {"manifest_sha256": "sha"})
    before = {n: q.detach().clone() for n, q in b.trainable()}
    with torch.no_grad():
        for _, q in b.trainable():
            q.add_(1.0)
    again = Single(tmp_path, "sha", CPU).open(True, lambda: cleared.append(2))
    assert again.saved is not None and again.saved.update == 2 and cleared == [1]
    p.restore(again.saved, b, opt)
    assert all(torch.equal(q, before[n]) for n, q in b.trainable())


class _TreeBackend(TinyBackend):
    """A tiny backend that declares a tree scorer (the declaration is all the choice reads)."""

    def tree_scorer(self):
        return self

    def tree_limit(self) -> int:
        return 1 << 30


def test_the_scorer_is_chosen_from_what_the_backend_declares():
    tiny = TinyBackend(SPEC, CPU)
    assert tiny.tree_scorer() is None
    assert isinstance(choose_scorer(tiny, 64), CharacterTrees)
    assert isinstance(choose_scorer(_TreeBackend(SPEC, CPU), 64), TokenTrees)


@torch.no_grad()
def test_character_trees_equal_per_candidate_and_fall_back_when_codes_are_ragged():
    b = TinyBackend(SPEC, CPU)
    ctx = b.render([{"role": "user", "content": "What is the code?"}]) + "The code is "
    ids = b.tokenize(ctx)
    codes = [f"{i:03d}" for i in range(0, 1000, 37)]
    s = CharacterTrees(b, 16)
    s.begin()
    (tree,) = s.add(7, ctx, ids, codes)
    assert (tree.key, tree.mode, tree.group, s.pending) == (7, PREFIX_TREE, 1, False)
    exact = score_per_candidate(b, ctx, ids, codes)
    assert np.abs(tree.values - exact).max() < 1e-4
    (ragged,) = s.add(8, ctx, ids, ["12", "345"])  # two lengths: no common tree, exact per candidate
    assert ragged.mode == PER_CANDIDATE
    assert np.array_equal(ragged.values, PerCandidate(b).add(8, ctx, ids, ["12", "345"])[0].values)
    assert s.flush() == []
