"""A stop request during scoring: the evaluator raises Interrupted before the next model call,
so the wait is at most the one call in progress, and on the CPU a call holds a bounded number of
fed nodes (scoring.tree.CPU_NODES_PER_CALL), whatever the memory bound would allow."""

import io
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from canary_trainer.errors import Interrupted
from canary_trainer.evaluate import Evaluator
from canary_trainer.events import Events
from canary_trainer.interrupt import StopFlag
from canary_trainer.scoring.tree import CPU_NODES_PER_CALL, TreeBatcher, code_token_lists

from .fixtures import canary_prefill, canary_prompt
from .hf_fixtures import hub_env  # noqa: F401  (fixture)
from .test_hf_backend import backend

IDENTS = ["Ada Lovelace #0", "Grace Hopper #12", "Alan Turing #7", "Barbara Liskov #45", "Frances Allen #9",
          "Radia Perlman #2"]


def _probe(i: int, ident: str) -> dict:
    return {"id": f"p{i}", "canary_id": f"c{i}", "kind": "focal", "prompt": canary_prompt(ident, "[redacted]"),
            "prefill": canary_prefill(ident), "decode": ["prefill"]}


def _manifest(probes: list[dict], codes: list[str]) -> Any:
    return SimpleNamespace(data={"probes": probes}, eval={"score_batch_size": 64, "max_new_tokens": 6},
                           space={"alphabet": "0123456789", "length": 4},
                           arms={p["canary_id"]: "member" for p in probes}, candidates=lambda _cid: codes)


def test_a_stop_during_scoring_interrupts_before_the_next_model_call(hub_env, tmp_path: Path):
    b = backend("qwen3")
    rng = random.Random(7)
    codes = sorted({f"{rng.randrange(10_000):04d}" for _ in range(400)})
    probes = [_probe(i, ident) for i, ident in enumerate(IDENTS)]
    flag = StopFlag()
    ev = Evaluator(b, _manifest(probes, codes), tmp_path, Events(io.StringIO()), flag)
    ev.scorer.begin()
    # a cap below one probe's tree (~440 nodes): each probe runs alone in several tree calls, as a
    # large tree (six-digit codes) or a large group does
    calls: list[str] = []
    after: list[str] = []
    real_prompts, real_tree = b.tree_prompts, b.tree_logprobs

    def prompts(ctxs):
        (after if flag else calls).append("prompts")
        return real_prompts(ctxs)

    def tree(*args):
        (after if flag else calls).append("tree")
        out = real_tree(*args)
        if calls.count("tree") == 1:
            flag.set("received SIGTERM")  # arrives while the first tree call runs
        return out

    b.tree_prompts, b.tree_logprobs = prompts, tree  # type: ignore[method-assign]
    begin = ev.scorer.begin
    ev.scorer.begin = lambda stop=None: (begin(stop), setattr(ev.scorer.batcher, "max_nodes", 200))[0]
    with pytest.raises(Interrupted, match="received SIGTERM"):
        ev.evaluate(probes, "final", tmp_path / "scores", [p["id"] for p in probes])
    assert calls == ["prompts", "tree"] and after == []  # no model call once the flag was set
    assert ev.scorer.batcher.calls == 1
    assert len(list((tmp_path / "scores").glob("*.f32"))) < len(probes)


def test_the_cpu_caps_fed_nodes_per_call_below_the_memory_bound(hub_env):
    b = backend("qwen3")
    codes = [f"{i:04d}" for i in range(10_000)]
    batcher = TreeBatcher(b)
    assert b.device.type == "cpu" and batcher.max_nodes == CPU_NODES_PER_CALL
    width = 0
    for i, ident in enumerate(IDENTS[:3]):
        ctx = b.render(canary_prompt(ident, "[redacted]")) + canary_prefill(ident)
        ids = b.tokenize(ctx)
        split = code_token_lists(b, ctx, ids, codes)
        assert split is not None
        assert batcher.add(i, ids, split) == []  # held back: no model call
        width = max(width, len(batcher.pending[-1].whole.token))
    assert width == 1110  # 10 + 100 + 1,000
    group = batcher.pending
    # the memory bound alone would take a fourth probe (and dozens more), the node cap does not
    assert b.tree_call_bytes(4, max(len(p.prompt) for p in group), width) <= batcher.limit
    assert not batcher.fits(group + group[:1])
    assert TreeBatcher(b, max_nodes=1 << 30).fits(group + group[:1])


class _Stop(Exception):
    pass


@pytest.mark.parametrize("path", ["character-tree", "per-candidate"])
def test_the_walking_scorers_check_the_stop_before_every_model_call(path):
    from canary_trainer.backends.tiny import TinyBackend
    from canary_trainer.scoring.scorers import CharacterTrees

    from .test_placement import CPU, SPEC

    b = TinyBackend(SPEC, CPU)
    ctx = b.render([{"role": "user", "content": "What is the code?"}]) + "The code is "
    ids = b.tokenize(ctx)
    codes = [f"{i:03d}" for i in range(0, 1000, 7)] if path == "character-tree" else ["12", "345"] * 100
    s = CharacterTrees(b, 16)  # 16 nodes per pass: several passes; per candidate: batches of 64
    seen: list[str] = []
    model = {"character-tree": "extend", "per-candidate": "logits"}[path]
    real = getattr(b, model)

    def call(*args, **kw):
        seen.append(model)
        return real(*args, **kw)

    setattr(b, model, call)

    def stop():
        seen.append("check")
        if seen.count(model) == 1:
            raise _Stop

    s.begin(stop)
    with pytest.raises(_Stop):
        s.add(0, ctx, ids, codes)
    assert seen[-2:] == [model, "check"] and seen.count(model) == 1
