#!/usr/bin/env bash
# On a lent GPU machine: one slice of a built-in policy benchmark spread over several device calls or sessions.
#   RUN=builtin-fp32-h100 [RUNS_TGZ=path/runs.tgz] [PREBUILT=cache.tgz] [BENCH_S=540] \
#     bash scripts/device_bench.sh --shapes FILE --budget 12 ...
# RUNS_TGZ is the runs.tgz an earlier slice returned: the campaign resumes from it, since every machine starts bare;
# it also carries the baselines' autotuning picks (autotune_picks/ in the run folder), so every slice uses the same.
# The run folder is packed into $OUT/runs.tgz at the end, also when BENCH_S stops the campaign; once the campaign
# finishes, $OUT holds the generated table too (RUNS_DIR: where the run folder lives, /tmp/runs by default).
# Other arguments go to scripts/bench_builtin_policy.py. The machine's copy of the tree may have no .git, or one whose
# HEAD is older than its files: give the code's commit as CUDAL2_COMMIT=<hash>, which the run's campaign.json
# records for the table's header (it wins over git's HEAD).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out}; mkdir -p "$OUT"
. scripts/device_env.sh || exit 1
RUN=${RUN:?set RUN to the campaign run name}
RUNS=${RUNS_DIR:-/tmp/runs}; mkdir -p "$RUNS"
if [ -n "${RUNS_TGZ:-}" ]; then tar xzf "$RUNS_TGZ" -C "$RUNS" || exit 1; fi
# PREBUILT: a compile cache made without a GPU (scripts/prebuild_first_batches.py: first batches, or --run: the players)
if [ -n "${PREBUILT:-}" ]; then mkdir -p "$CUDAL2_CACHE/build" && tar xzf "$PREBUILT" -C "$CUDAL2_CACHE/build"; fi
# cuBLASLt-AutoTuning's picks travel with the run: each machine would otherwise tune again and may pick another
# algorithm (once: TN 160.8-167.9 us on its first machine, another pick at 153.4-156.0 on its third), and one run
# would compare its slices against different baselines
PICKS="$RUNS/$RUN/autotune_picks"
if [ -d "$PICKS" ]; then mkdir -p "$CUDAL2_CACHE/autotune" && cp "$PICKS"/*.json "$CUDAL2_CACHE/autotune/" 2>/dev/null; fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt" 2>&1
timeout "${BENCH_S:-540}" python3 scripts/bench_builtin_policy.py --run "$RUN" --runs-dir "$RUNS" --out "$OUT" "$@" \
  > "$OUT/bench.log" 2>&1
rc=$?
if [ -d "$RUNS/$RUN" ]; then
  mkdir -p "$PICKS" && cp "$CUDAL2_CACHE"/autotune/*.json "$PICKS/" 2>/dev/null
  tar czf "$OUT/runs.tgz" -C "$RUNS" "$RUN"
fi
tail -40 "$OUT/bench.log"
if [ $rc -eq 124 ]; then echo "stopped after ${BENCH_S:-540} s: run again with RUNS_TGZ=<this runs.tgz> to resume"; fi
exit $rc
