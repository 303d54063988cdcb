# canary-audit trainer image: PyTorch + transformers + peft + trainer-py + the JSON Schemas, with
# exactly the Python stack of trainer-py/requirements.lock (the same pins the tests and local workers
# run on; test/env/pins.test.ts fails when this file and the lock disagree).
#   docker build -f docker/trainer.Dockerfile -t canary-audit-trainer:latest .
# CPU-only variant (no CUDA libraries, ~1 GB instead of several):
#   docker build -f docker/trainer.Dockerfile -t canary-audit-trainer:cpu \
#     --build-arg BASE_IMAGE=python:3.11-slim-bookworm \
#     --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu .
# Workers start it per run (`canary-audit worker --runner docker`):
#   docker run --rm --init --gpus device=N --user UID:GID -v <run dir>:/work/run -w /work/run \
#     -v <HF cache>:/work/hf -e HF_HOME=/work/hf \
#     canary-audit-trainer:latest python -m canary_trainer run --manifest /work/run/manifest.json \
#     --out /work/run/output --resume
# The build context is the repository root (trainer-py/ and schemas/ are copied from it).
# The base image's PyTorch is the lock's torch version (pip then keeps it: same version).
ARG BASE_IMAGE=pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime
FROM ${BASE_IMAGE}

# Empty: the public index (CUDA wheels of torch on Linux). https://download.pytorch.org/whl/cpu: CPU wheels.
ARG TORCH_INDEX_URL=
COPY trainer-py/requirements.lock /opt/canary-audit/trainer-py/requirements.lock
RUN pip install --no-cache-dir --disable-pip-version-check \
      ${TORCH_INDEX_URL:+--extra-index-url "$TORCH_INDEX_URL"} \
      -r /opt/canary-audit/trainer-py/requirements.lock

WORKDIR /opt/canary-audit
COPY trainer-py/pyproject.toml /opt/canary-audit/trainer-py/pyproject.toml
COPY schemas/ /opt/canary-audit/schemas/
COPY trainer-py/canary_trainer/ /opt/canary-audit/trainer-py/canary_trainer/

# Workers pass --user UID:GID so outputs on the mounted run folder belong to them; that user has no
# home in the image, so caches go to writable places (HF_HOME is the mounted Hugging Face cache).
ENV PYTHONPATH=/opt/canary-audit/trainer-py \
    CANARY_SCHEMAS_DIR=/opt/canary-audit/schemas \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    HF_HOME=/work/hf

# Fail the build, not the first run, if the trainer cannot import or the stack is not the lock's.
# (Names lower-cased with - for _, local versions like +cu130 or +cpu dropped, then every lock line
# must be among the installed ones.)
RUN python -c "import canary_trainer.cli, transformers, peft, jsonschema" \
 && pip list --format=freeze --disable-pip-version-check | tr 'A-Z_' 'a-z-' | sed 's/+.*//' | LC_ALL=C sort > /tmp/installed.txt \
 && grep -v '^#' /opt/canary-audit/trainer-py/requirements.lock | tr 'A-Z_' 'a-z-' | sed 's/+.*//' | LC_ALL=C sort > /tmp/locked.txt \
 && { comm -13 /tmp/installed.txt /tmp/locked.txt | grep . && { echo "image differs from requirements.lock" >&2; exit 1; } || true; } \
 && rm /tmp/installed.txt /tmp/locked.txt

# Not root when started without --user (workers always pass one).
RUN mkdir -p /work/run /work/hf /work/cache && chmod 1777 /work/run /work/hf /work/cache
USER 65534:65534
WORKDIR /work/run
CMD ["python", "-m", "canary_trainer", "--help"]
