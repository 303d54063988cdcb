# canary-audit trainer image: CUDA PyTorch + transformers + peft + trainer-py + the JSON Schemas.
#   docker build -f docker/trainer.Dockerfile -t canary-audit-trainer:latest .
# Workers start it per run (`canary-audit worker --runner docker`):
#   docker run --rm --init --gpus device=N --user UID:GID -v <run dir>:/work/run -w /work/run \
#     canary-audit-trainer:latest python -m canary_trainer run --manifest /work/run/manifest.json \
#     --out /work/run/output --resume
# The build context is the repository root (trainer-py/ and schemas/ are copied from it).
FROM pytorch/pytorch:2.4.1-cuda12.1-cudnn9-runtime

# Versions pinned so a result's provenance names one software stack. jsonschema 4.17 keeps the
# RefResolver API the trainer uses (the same as Debian's python3-jsonschema).
RUN pip install --no-cache-dir \
      transformers==4.44.2 \
      peft==0.12.0 \
      accelerate==0.34.2 \
      safetensors==0.4.5 \
      sentencepiece==0.2.0 \
      jsonschema==4.17.3 \
      numpy==1.26.4

WORKDIR /opt/canary-audit
COPY schemas/ /opt/canary-audit/schemas/
COPY trainer-py/canary_trainer/ /opt/canary-audit/trainer-py/canary_trainer/

# Workers pass --user UID:GID so outputs on the mounted run folder belong to them; that user has no
# home in the image, so caches go to writable places (HF_HOME is usually a mounted cache).
ENV PYTHONPATH=/opt/canary-audit/trainer-py \
    CANARY_SCHEMAS_DIR=/opt/canary-audit/schemas \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    HF_HOME=/work/hf

# Fail the build, not the first run, if the trainer cannot import.
RUN python -c "import canary_trainer.cli, transformers, peft, jsonschema"

WORKDIR /work/run
CMD ["python", "-m", "canary_trainer", "--help"]
