#!/usr/bin/env bash
# On a lent GPU machine: the outside harness (scripts/outside_harness.py) on exported kernels, its JSON, Markdown and
# log in $OUT (or ./device-out). Each SOURCE is an export folder (manifest.json), a run folder (archive.sqlite) or an
# archive file, exported here first; default examples/sample_run. Options after -- go to the harness.
#   bash scripts/device_outside.sh [SOURCE ...] [-- --shapes 64x128x128 --graphs ...]
# Needs the CUTLASS headers: carry .whl (scripts/fetch_device_wheels.sh), or just its nvidia_cutlass wheel, the one
# used. A campaign: export it here first (cudal2 archive export runs/oh_export --run NAME) and carry that folder.
# COMMIT=<hash> names the code's commit in the output (the device's copy of the tree may have no .git).
# The harness starts no new shape after BUDGET_S seconds (default 400), so a big export still ends inside one call.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out}; mkdir -p "$OUT"
sources=(); extra=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; extra=("$@"); break; fi
  sources+=("$1"); shift
done
[ ${#sources[@]} -gt 0 ] || sources=(examples/sample_run)
if ! python3 -c "import cutlass_library" 2>/dev/null; then
  wheel=$(compgen -G ".whl/nvidia_cutlass-*.whl" | head -1)
  [ -n "$wheel" ] || { echo "no CUTLASS: carry .whl (scripts/fetch_device_wheels.sh)"; exit 2; }
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/oh_site "$wheel" || exit 2
  export PYTHONPATH=/tmp/oh_site${PYTHONPATH:+:$PYTHONPATH}
fi
exports=(); i=0
for s in "${sources[@]}"; do
  if [ -f "$s/manifest.json" ]; then exports+=("$s"); continue; fi
  db=$s; [ -d "$s" ] && db=$s/archive.sqlite
  [ -f "$db" ] || { echo "$s: neither an export folder nor a run folder or archive"; exit 2; }
  # exported from a copy: opening an archive rewrites its header, and the source may be a tracked file
  src=/tmp/oh_src_$i; dst=/tmp/oh_export_$i; i=$((i + 1)); rm -rf "$src" "$dst"
  cp -r "$(dirname "$db")" "$src" && db=$src/$(basename "$db") || exit 2
  # the exporter is the agent's (the manifest it writes is the harness's input); the harness itself imports neither
  PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 - "$db" "$dst" <<'PY' || exit 2
import sys
from pathlib import Path
from agent.campaign.archive_io import export_archive
db, dst = Path(sys.argv[1]), Path(sys.argv[2])
m = export_archive(db, dst, run_dir=db.parent if (db.parent / "campaign.sqlite").is_file() else None)
print(f"exported {len(m['kernels'])} kernel(s) from {db} to {dst}")
PY
  exports+=("$dst")
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
python3 scripts/outside_harness.py "${exports[@]}" --out "$OUT" --build-dir /tmp/oh_build --jobs "$(nproc)" \
  --budget-s "${BUDGET_S:-400}" ${COMMIT:+--commit "$COMMIT"} "${extra[@]}" 2>&1 | tee "$OUT/outside.log"
rc=${PIPESTATUS[0]}
tail -n 40 "$OUT/outside_harness.md" 2>/dev/null
exit "$rc"
