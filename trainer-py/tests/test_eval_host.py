"""The host work of an evaluation phase is done once per run, not once per probe: probes whose
contexts end alike (every canary's prefill ends "Reference code: ") share one tokenization of the
candidates and one trie, and what they share equals tokenizing each whole context."""

import pytest

pytest.importorskip("transformers")

from canary_trainer.manifest import exhaustive_codes  # noqa: E402
from canary_trainer.scoring import tree as trie  # noqa: E402
from canary_trainer.scoring.walk import context_tail  # noqa: E402

from .fixtures import canary_prompt  # noqa: E402
from .hf_fixtures import hub_env  # noqa: E402,F401  (fixture)
from .test_hf_backend import backend  # noqa: E402

IDENTS = ["Ben Tate\n46 Field Lane, Hollis", "Noel Marsh\n37 Church Lane, Westbury", "Ada Lovelace #0",
          "Grace Brewster Murray Hopper #12"]


@pytest.mark.parametrize("family", ["qwen3", "llama3"])
def test_probes_share_one_tokenization_and_one_trie(hub_env, family, monkeypatch):
    b = backend(family)
    codes = exhaustive_codes("0123456789", 4)
    big = []
    tokenize_batch = b.tokenize_batch
    monkeypatch.setattr(b, "tokenize_batch", lambda texts: (big.append(len(texts)) if len(texts) >= 1000 else None)
                        or tokenize_batch(texts))
    cache = trie.SpanCache()  # the evaluator's: one per backend, kept for the run
    trie._TRIES.clear()
    probes = []
    for ident in IDENTS:
        ctx = b.render(canary_prompt(ident, "[redacted]")) + f"Hello team.\n\nKind regards,\n{ident}\nReference code: "
        ids = b.tokenize(ctx)
        assert context_tail(b, ctx, ids)[0] == "Reference code: "  # the shortest clean tail, shared
        split = trie.code_token_lists(b, ctx, ids, codes, cache)
        probes.append((ctx, ids, split, trie._Probe(ident, ids, split)))
    assert big == [len(codes)]  # one tokenization of the 10,000 candidates for the four probes
    assert all(p[3].whole is probes[0][3].whole for p in probes)  # one trie
    for ctx, ids, split, _ in probes[::3]:  # what they share is what each whole context gives
        assert split == trie._spans(b, ctx, ids, codes)
