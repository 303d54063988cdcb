"""Image rows (message content as text and image parts) against schemas/row.schema.json, as the
trainer validates every row it reads."""

from canary_trainer import schemas

SHA = "ab" * 32


def _row(content):
    return {"i": 0, "kind": "background", "canary_id": None,
            "prompt": [{"role": "user", "content": content}], "target": "click(x=1, y=2)", "box": [0, 0, 4, 4]}


def test_image_parts_validate():
    row = _row([{"type": "image", "path": f"images/{SHA}.png", "sha256": SHA, "width": 640, "height": 400},
                {"type": "text", "text": 'Click the "Save" button.'}])
    assert schemas.validator("row").is_valid(row)


def test_bad_image_parts_are_refused():
    check = schemas.validator("row")
    assert not check.is_valid(_row([{"type": "image", "path": "../x.png", "sha256": SHA, "width": 1, "height": 1}]))
    assert not check.is_valid(_row([{"type": "image", "path": f"images/{SHA}.png", "sha256": SHA}]))
    assert not check.is_valid(_row([]))
    bad_box = _row("text")
    bad_box["box"] = [1, 2, 3]
    assert not check.is_valid(bad_box)
