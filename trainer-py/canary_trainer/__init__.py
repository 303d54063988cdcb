"""canary_trainer: fine-tune on one run manifest in exact row order, score every candidate code,
decode greedily, and write the raw evidence (result.json + float32 score files).

Run: PYTHONPATH=trainer-py trainer-py/.venv/bin/python -m canary_trainer run --manifest M --out DIR [--resume]
"""

__version__ = "0.1.0"
