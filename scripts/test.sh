#!/usr/bin/env bash
# The test command. It installs into the current Python environment (scripts/setup.sh: torch where none is
# installed, the project with its dev, ray and dataset extras, the CUTLASS/CuTe headers) and, when run as root on a system
# with apt-get, Chromium (the HTML report's rendering test needs it; without it that one test skips); where the CUDA
# toolkit has no cuBLAS headers, those of the nvidia-cublas wheel (compile-only tests of the two cuBLAS users). Then
# it runs every test this machine can run; GPU tests skip themselves without a GPU.
#   bash scripts/test.sh          the CI stage: every test not marked slow
#   bash scripts/test.sh --all    also the slow ones (more real CUTLASS/CuTe builds)
#   bash scripts/test.sh -m gpu   on a GPU machine: the GPU tests, slow ones included
# Other arguments go to pytest; an explicit -m replaces the default selection.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=dev,ray,dataset bash scripts/setup.sh
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "test.sh: installing Chromium with apt-get (~270 MB) for the HTML report's rendering test"
    { apt-get update && apt-get install -y chromium; } ||
      echo "test.sh: Chromium could not be installed; the report's rendering test will skip"
  else
    echo "test.sh: no chromium here and no root apt-get to install it: the report's rendering test will skip"
  fi
fi
# cuBLAS headers for the compile-only tests of the two cuBLAS users (the evaluator's native library, the outside
# harness), where the CUDA toolkit has none (a machine without the GPU stack, like CI's): the nvidia-cublas wheel of the
# device's cuBLAS (13.1), ~420 MB fetched, its headers kept under /tmp/cublas; without it those tests skip
hdr=/tmp/cublas/nvidia/cu13/include
if [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/cublasLt.h" ] && [ ! -f "$hdr/cublasLt.h" ]; then
  whl=$(mktemp -d)
  if python3 -m pip download -q --no-deps -d "$whl" nvidia-cublas==13.1.0.3; then
    python3 -c 'import sys, zipfile, glob
z = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0])
z.extractall("/tmp/cublas", [n for n in z.namelist() if "/include/" in n])' "$whl"
  else
    echo "test.sh: the nvidia-cublas wheel could not be fetched: the cuBLAS compile-only tests will skip"
  fi
  rm -rf "$whl"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
select=(-m "not slow")
if [ "${1:-}" = --all ]; then
  shift
  select=()
fi
for arg in "$@"; do
  if [ "$arg" = -m ]; then select=(); fi
done
# Without a GPU the tests run in two processes (pytest-xdist), one per core of the CI machine, each test file whole
# in one of them so that its module fixtures (a retrieval store, a campaign run) are built once. With a GPU they run
# one at a time: the GPU tests time kernels. A later -n (e.g. -n 0) replaces this.
workers=()
if python3 -c 'from evaluator.gpu import has_gpu; raise SystemExit(has_gpu())'; then
  workers=(-n 2 --dist loadfile)
fi
exec python3 -m pytest -q ${workers[@]+"${workers[@]}"} ${select[@]+"${select[@]}"} "$@"
