#!/usr/bin/env bash
# The main job: set up, then run a small campaign with the built-in policy and write its HTML report.
# Without a CUDA GPU, `cudal2 campaign` says so and this script stops with exit code 2.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
RUN=${RUN:-quickstart}
rc=0
cudal2 campaign --shapes examples/shapes_small.txt --model builtin --budget "${BUDGET:-8}" --run "$RUN" || rc=$?
if [ "$rc" -eq 2 ]; then
  exit 2  # no GPU or bad input: the message above says which
fi
cudal2 report "$RUN"  # also when some shape failed (rc 1): the report shows what finished
echo "report: runs/$RUN/report.html · transcript: cudal2 inspect $RUN · kernels: cudal2 archive export DIR --run $RUN"
exit "$rc"
