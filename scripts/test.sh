#!/usr/bin/env bash
# The test command: set up, then run every test that this machine can run (GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
exec python3 -m pytest -q "$@"
