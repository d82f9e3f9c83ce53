#!/usr/bin/env bash
# On a lent GPU machine: one slice of a built-in policy benchmark spread over several device calls or sessions.
#   RUN=builtin-fp32-h100 [RUNS_TGZ=path/runs.tgz] [PREBUILT=cache.tgz|resume_cache.txz] [BENCH_S=540] [RESUME_S=90] \
#     bash scripts/device_bench.sh --shapes FILE --budget 12 ...
# RUNS_TGZ is the runs.tgz an earlier slice returned: the campaign resumes from it, since every machine starts bare;
# it also carries the baselines' autotuning picks (autotune_picks/ in the run folder), so every slice uses the same.
# The run folder is packed into $OUT/runs.tgz at the end, also when BENCH_S stops the campaign; once the campaign
# finishes, $OUT holds the generated table too (RUNS_DIR: where the run folder lives, /tmp/runs by default).
# Other arguments go to scripts/bench_builtin_policy.py. The machine's copy of the tree may have no .git, or one whose
# HEAD is older than its files: give the code's commit as CUDAL2_COMMIT=<hash>, which the run's campaign.json
# records for the table's header (it wins over git's HEAD). When BENCH_S stops the campaign, $OUT/resume_cache.txz
# holds what the next slice builds first (give it as PREBUILT there); RESUME_S bounds that packing, 0 skips it.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out}; mkdir -p "$OUT"
. scripts/device_env.sh || exit 1
RUN=${RUN:?set RUN to the campaign run name}
RUNS=${RUNS_DIR:-/tmp/runs}; mkdir -p "$RUNS"
if [ -n "${RUNS_TGZ:-}" ]; then tar xzf "$RUNS_TGZ" -C "$RUNS" || exit 1; fi
# PREBUILT: a compile cache made without a GPU (scripts/prebuild_first_batches.py: first batches, or --run: the players)
# or the resume_cache.txz an earlier slice returned
if [ -n "${PREBUILT:-}" ]; then
  mkdir -p "$CUDAL2_CACHE/build" && case "$PREBUILT" in
    *.txz|*.tar.xz) tar xJf "$PREBUILT" -C "$CUDAL2_CACHE/build" ;;
    *) tar xzf "$PREBUILT" -C "$CUDAL2_CACHE/build" ;;
  esac || exit 1
fi
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
# A slice stopped mid-campaign: the builds its next machine needs (the players of the shapes it started, the first
# batches of the rest), mostly cache hits here, packed with xz: kernels of one family share most of their bytes, so
# a few MiB carry what would take minutes of nvcc there (CUTLASS players, 1-2 minutes each)
shapes=""; same=(); prev=""
for arg in "$@"; do
  case "$prev" in --shapes) shapes=$arg ;; --acc|--mode|--per-step) same+=("$prev" "$arg") ;; esac
  case "$arg" in --shapes=*) shapes=${arg#--shapes=} ;; --acc=*|--mode=*|--per-step=*) same+=("$arg") ;; esac
  prev=$arg
done
if [ $rc -eq 124 ] && [ -d "$RUNS/$RUN" ] && [ -n "$shapes" ] && [ "${RESUME_S:-90}" -gt 0 ]; then
  tmp=$(mktemp -d)
  if timeout "${RESUME_S:-90}" python3 scripts/prebuild_first_batches.py --run "$RUNS/$RUN" --shapes "$shapes" \
       "${same[@]}" --out "$tmp/resume.tgz" --cache "$CUDAL2_CACHE/build" > "$OUT/resume_cache.log" 2>&1; then
    mkdir -p "$tmp/c" && tar xzf "$tmp/resume.tgz" -C "$tmp/c" && tar cf - -C "$tmp/c" . | xz -8 -T8 > "$OUT/resume_cache.txz"
  fi
  rm -rf "$tmp"
fi
tail -40 "$OUT/bench.log"
if [ $rc -eq 124 ]; then
  echo "stopped after ${BENCH_S:-540} s: run again with RUNS_TGZ=<this runs.tgz>" \
    "$([ -f "$OUT/resume_cache.txz" ] && echo "PREBUILT=<this resume_cache.txz>") to resume"
fi
exit $rc
