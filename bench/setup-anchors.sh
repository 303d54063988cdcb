#!/usr/bin/env bash
# Build bench/.venv-anchors: the trainer's pinned stack (trainer-py/requirements.lock) plus the two
# real anchors the benchmarks compare against, lm-evaluation-harness and TRL, at exact versions.
# Bench-only: the trainer, its tests and the workers never use this venv.
#   bash bench/setup-anchors.sh            (idempotent: a stamp of this script + the lock skips a rebuild)
# lm_eval's and datasets' own pins conflict with the lock (datasets 5.0.1 wants fsspec <= 2026.6.0,
# the lock has 2026.9.0; lm_eval needs evaluate, rouge-score, sqlitedict, ... that only its task
# suite imports), so the anchors go in with --no-deps plus the runtime packages that the imported
# paths (lm_eval.models.huggingface.HFLM, trl.SFTTrainer) need; the last step imports both.
set -euo pipefail
cd "$(dirname "$0")/.."
base_python=${CANARY_AUDIT_BASE_PYTHON:-/usr/bin/python3}
venv=bench/.venv-anchors
stamp=$venv/.stamp
want=$( (cat bench/setup-anchors.sh trainer-py/requirements.lock; "$base_python" -VV) | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
rm -rf "$venv"
"$base_python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check
  --retries "${PIP_RETRIES:-0}" --timeout "${PIP_TIMEOUT:-3}")
"${pip[@]}" -r trainer-py/requirements.lock 2> >(grep -v "^WARNING: Location 'file://" >&2)
"${pip[@]}" --no-deps \
  lm_eval==0.4.13 trl==1.13.0 datasets==5.0.1 \
  dill==0.4.1 multiprocess==0.70.19 xxhash==4.0.1 pyarrow==25.0.1 pandas==2.3.3 \
  more_itertools==10.8.0 requests==2.34.2 python-dateutil==2.9.0.post0 six==1.17.0 pytz==2026.4 \
  tzdata==2026.4 charset-normalizer==3.5.2 urllib3==2.8.0 \
  2> >(grep -v "^WARNING: Location 'file://" >&2)
"$venv/bin/python" -c '
import lm_eval, trl
from lm_eval.models.huggingface import HFLM
from trl import SFTConfig, SFTTrainer
from importlib.metadata import version
print("anchors:", "lm_eval", version("lm_eval"), "trl", version("trl"), "transformers", version("transformers"), "torch", version("torch"))
'
echo "$want" >"$stamp"
