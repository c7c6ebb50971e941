#!/usr/bin/env bash
# The project's test command (the README's second command; .ci/run calls it).
# Unpacks Virtuoso 7 beside the repo for the endpoint tests (idempotent, seconds), keeps every
# library offline, and runs pytest with any extra arguments passed through.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-.venv/bin/python}"
bash scripts/setup_virtuoso.sh > /dev/null
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True
exec "${python}" -m pytest "$@"
