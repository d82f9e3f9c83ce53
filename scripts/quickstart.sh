#!/usr/bin/env bash
# The main job: set up, then run a small campaign with the built-in policy and write its HTML report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
RUN=${RUN:-quickstart}
cudal2 campaign --shapes examples/shapes_small.txt --model builtin --budget "${BUDGET:-8}" --run "$RUN"
cudal2 report "$RUN"
