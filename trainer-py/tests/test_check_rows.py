"""The plan-time row-length check counts exactly the tokens training counts, without the weights."""

import json

import pytest

pytest.importorskip("transformers")

from canary_trainer import check_rows  # noqa: E402
from canary_trainer.batches import encode_row  # noqa: E402

from .fixtures import canary_prompt, canary_target  # noqa: E402
from .hf_fixtures import hub_env, model_id  # noqa: E402,F401  (hub_env: fixture)
from .test_hf_backend import backend, spec  # noqa: E402


def rows():
    ident = "Ada Lovelace #0"
    return [
        {"prompt": canary_prompt(ident, "[redacted]"), "target": canary_target(ident, "1234")},
        {"prompt": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "How long? " * 40}], "target": "Long."},
        {"prompt": [{"role": "user", "content": "hi"}], "target": "ok"},
    ]


@pytest.mark.parametrize("family", ["qwen3", "llama3", "gptoss"])
def test_counts_equal_the_trainers_encoding(hub_env, family):
    b = backend(family)
    trained = {i: len(encode_row(b, {"i": i, **row}, 100_000, "row").ids) for i, row in enumerate(rows())}
    out = check_rows.count(spec(family), rows(), 0)  # a limit of 0: every row is listed with its count
    assert out["over_count"] == 3 and {o["i"]: o["tokens"] for o in out["over"]} == trained


def test_rows_over_the_limit_are_listed_longest_first(hub_env):
    out = check_rows.count(spec("qwen3"), rows(), 40)
    assert out["rows"] == 3 and out["limit"] == 40
    assert out["over_count"] == 2
    assert [o["i"] for o in out["over"]] == [1, 0]
    assert out["longest"] == out["over"][0]["tokens"] > 40


def test_the_model_positions_bound_the_limit(hub_env):
    # The test models read 1,024 positions (GPT-OSS 131,072): a larger max_length is cut to it.
    assert check_rows.count(spec("qwen3"), rows(), 1_000_000)["limit"] == 1024


def test_a_model_not_on_this_machine_is_skipped_with_the_reason(hub_env, tmp_path, capsys):
    model = {**spec("qwen3"), "name": "canary-test/not-here"}
    (tmp_path / "model.json").write_text(json.dumps(model))
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows()))
    assert check_rows.main(["--model", str(tmp_path / "model.json"), "--rows", str(tmp_path / "rows.jsonl"), "--max-length", "64"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "canary-test/not-here" in out["skipped"] and "models fetch" in out["skipped"]


def test_several_models_in_one_process_answer_one_line_each_in_order(hub_env, tmp_path, capsys):
    missing = {**spec("qwen3"), "name": "canary-test/not-here"}
    (tmp_path / "missing.json").write_text(json.dumps(missing))
    (tmp_path / "qwen3.json").write_text(json.dumps(spec("qwen3")))
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows()))
    args = ["--model", str(tmp_path / "missing.json"), "--rows", str(tmp_path / "rows.jsonl"), "--max-length", "64"]
    args += ["--model", str(tmp_path / "qwen3.json"), "--rows", str(tmp_path / "rows.jsonl"), "--max-length", "40"]
    assert check_rows.main(args) == 0
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert "canary-test/not-here" in first["skipped"]
    assert second == check_rows.count(spec("qwen3"), rows(), 40)


def test_options_not_given_once_per_model_are_bad_arguments(tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        check_rows.main(["--model", "a.json", "--model", "b.json", "--rows", "r.jsonl", "--max-length", "64"])
    assert exit_info.value.code == 2
