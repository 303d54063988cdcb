"""The run manifest's shape once loaded (`manifest.load_manifest`): schema-valid, with the schema's
defaults applied. A key the schema requires, or gives a default, is Required here; the others are
NotRequired. `model.tiny` is present exactly when the backend is tiny, `model.hf` when it is hf.
tests/test_manifest_types.py checks these against ../schemas/manifest.schema.json, key for key."""

from typing import Any, Literal, NotRequired, TypedDict


class FileRef(TypedDict):
    path: str
    sha256: str
    count: int


UtilityMetric = Literal["loss", "accuracy", "exact_match", "token_f1", "point_in_box", "parse_rate"]


class UtilityRef(TypedDict):
    path: str
    sha256: str
    count: int
    metrics: NotRequired[list[UtilityMetric]]
    max_new_tokens: NotRequired[int]


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    # A string, or text and image parts (schemas/manifest.schema.json#/$defs/messages).
    content: str | list[dict[str, Any]]


class Inclusion(TypedDict):
    kind: Literal["randomized"]
    p: float
    pool: int
    seed: int


class SampledText(TypedDict):
    # Design sampled-text: how the trainer fills the placeholder secrets (sampled_text.py).
    length: int
    temperature: float
    decoys: int
    context: Literal["reply-start"]
    grid_seed: int
    seeds: dict[str, int]


class Audit(TypedDict):
    id: str
    name: str
    grid_file: NotRequired[str | None]
    grid_sha256: str
    cell_id: str
    cell: dict[str, Any]


class DatasetFile(TypedDict):
    split: str
    path: str
    sha256: str
    bytes: int


class Dataset(TypedDict):
    source: Literal["hub", "local"]
    repo: NotRequired[str]
    revision: NotRequired[str]
    sha: NotRequired[str]
    config: NotRequired[str | None]
    path: NotRequired[str]
    files: list[DatasetFile]


class Task(TypedDict):
    name: str
    seed: int
    params: NotRequired[dict[str, Any]]
    dataset: NotRequired[Dataset]
    utility_dataset: NotRequired[Dataset]


class PretrainSchedule(TypedDict):
    kind: Literal["constant", "cosine"]
    warmup_updates: int
    min_lr_ratio: float


class Pretrain(TypedDict):
    rows: FileRef
    updates: int
    batch_size: int
    lr: float
    schedule: PretrainSchedule
    seed: int
    init_seed: NotRequired[int]


class TinyVision(TypedDict):
    height: int
    width: int
    channels: list[int]
    rows: int
    cols: int
    max_pixels: int
    freeze: NotRequired[bool]


class TinySpec(TypedDict):
    n_layer: int
    n_head: int
    d_model: int
    max_len: int
    dropout: float
    pretrain: NotRequired[Pretrain]
    vision: NotRequired[TinyVision]


class HfSpec(TypedDict):
    dtype: Literal["bfloat16", "float16", "float32"]
    random_init: bool
    config_overrides: dict[str, Any]
    chat_template_kwargs: dict[str, Any]
    trust_remote_code: bool
    attn_implementation: str | None
    train_vision: NotRequired[bool]


class Finetune(TypedDict):
    method: Literal["full", "lora"]
    r: NotRequired[int]
    alpha: NotRequired[float]
    dropout: NotRequired[float]
    target_modules: NotRequired[list[str]]


class ModelSpec(TypedDict):
    backend: Literal["tiny", "hf"]
    name: str
    revision: str | None
    init_seed: int
    tiny: NotRequired[TinySpec]
    hf: NotRequired[HfSpec]
    finetune: Finetune


class Schedule(TypedDict):
    kind: Literal["constant", "cosine"]
    warmup_updates: int
    min_lr_ratio: float


class Training(TypedDict):
    lr: float
    schedule: Schedule
    batch_size: int
    updates: int
    max_length: int
    seed: int
    weight_decay: float
    betas: list[float]
    grad_clip: float
    checkpoint_every: int
    loss_explode: float
    device: Literal["auto", "cpu", "cuda"]
    gpus: NotRequired[int]
    parallel: NotRequired[Literal["fsdp"]]


class ImageRef(TypedDict):
    path: str
    sha256: str
    bytes: int


class Cue(TypedDict):
    visibility: str
    text: str
    params: NotRequired[dict[str, Any]]


class Canary(TypedDict):
    id: str
    cohort: str
    identity: str
    code: str
    cue: Cue
    dose: int
    window: NotRequired[list[float]]
    positions: list[int]
    candidates: NotRequired[list[str]]
    design: NotRequired[str]  # designs together in one run: the design of this canary's secret


class HeldOut(TypedDict):
    id: str
    identity: str
    code: str
    candidates: NotRequired[list[str]]
    design: NotRequired[str]


class Probe(TypedDict):
    id: str
    canary_id: str
    kind: Literal["hidden", "supplied", "substituted"]
    shown_code: str | None
    prompt: list[Message]
    prefill: str
    decode: list[Literal["prefill", "free"]]


class CandidateSpace(TypedDict):
    kind: Literal["exhaustive", "sampled"]
    alphabet: str
    length: int
    size: int
    decoys: NotRequired[int]
    seed: NotRequired[int]


class Eval(TypedDict):
    base_model: bool
    checkpoints: list[int]
    max_new_tokens: int
    score_batch_size: int


class ManifestData(TypedDict):
    schema_version: Literal["canary-audit.manifest/1"]
    inclusion: NotRequired[Inclusion]
    sampled_text: NotRequired[SampledText]
    run_id: str
    audit: Audit
    task: Task
    model: ModelSpec
    training: Training
    rows: FileRef
    utility: NotRequired[UtilityRef]
    images: NotRequired[list[ImageRef]]
    canaries: list[Canary]
    held_out: list[HeldOut]
    probes: list[Probe]
    candidate_space: CandidateSpace
    eval: Eval
    # schemas/stamp.schema.json#/$defs/provenance (the controller's stamps, passed through).
    provenance: dict[str, Any]
