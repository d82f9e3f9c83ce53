#!/usr/bin/env bash
# Installs cuda-l2 and what it needs into the current Python environment. Idempotent and offline-safe.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# torch must be in place before sentence-transformers, or pip pulls a multi-GB CUDA build. Where a torch is
# already installed (the GPU machine ships a CUDA one) it is kept.
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
  "$PY" -m pip install -q torch==2.13.0
fi
# EXTRAS: optional parts to install too (the tests add ray, so the cluster path is exercised).
"$PY" -m pip install -q -e ".[${EXTRAS:-dev}]"
# CUTLASS/CuTe headers come from the nvidia-cutlass wheel; its own dependencies are not needed for headers.
if ! "$PY" -c 'import cutlass_library' >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-deps nvidia-cutlass
fi
