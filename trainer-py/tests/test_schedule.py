import math

import pytest

from canary_trainer.schedule import lr_at


def test_warmup_then_constant():
    s = {"kind": "constant", "warmup_updates": 4, "min_lr_ratio": 0}
    assert [lr_at(u, 1.0, s, 10) for u in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]


def test_cosine_decays_to_the_floor():
    s = {"kind": "cosine", "warmup_updates": 2, "min_lr_ratio": 0.1}
    lrs = [lr_at(u, 2.0, s, 12) for u in range(12)]
    assert lrs[:2] == [1.0, 2.0]
    assert lrs[2] == pytest.approx(2.0)
    assert all(a >= b for a, b in zip(lrs[2:], lrs[3:]))
    assert lrs[-1] == pytest.approx(0.2 + 1.8 * 0.5 * (1 + math.cos(math.pi * 9 / 10)))
    assert lr_at(12, 2.0, s, 12) == pytest.approx(0.2)
