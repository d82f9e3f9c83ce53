#!/usr/bin/env bash
# On a lent GPU machine (no network), with .whl carried (scripts/fetch_device_wheels.sh): install the wheels and the
# packed embedding model, build the retrieval store from the CUTLASS/CuTe headers on every core, then run the LLM
# loop's GPU test (tests/test_llm_loop_gpu.py: a campaign against a local scripted OpenAI-protocol model, NCU on,
# retrieval on). Logs, the run's transcript, archive and HTML report go to $OUT (or ./device-out). Run it in one
# device call of 600 s (the install, the build and the test fit in it: BUILD_TIMEOUT and TEST_TIMEOUT bound them).
# Where the tree, the wheels and the model pass the 64 MiB a call carries, carry the wheels (model left out) in one
# call that sources scripts/device_env.sh, then, on the still-warm machine, this with WHEELS naming a folder that
# holds the model only: device_env.sh then uses the wheels the first call installed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out}; mkdir -p "$OUT"; export OUT
t0=$SECONDS
. scripts/device_env.sh || { echo "device_env failed"; exit 1; }
echo "wheels and model ready in $((SECONDS - t0)) s"
python3 -c "import chromadb, langgraph, openai; print('chromadb', chromadb.__version__)" || exit 1
export CUDAL2_RETRIEVAL_STORE=${CUDAL2_RETRIEVAL_STORE:-/tmp/cudal2-store}
timeout "${BUILD_TIMEOUT:-180}" python3 -m agent.cli corpus build 2>&1 | tee "$OUT/corpus_build.txt" | tail -4
echo "store built at $((SECONDS - t0)) s"
timeout "${TEST_TIMEOUT:-360}" python3 -m pytest -q -m gpu tests/test_llm_loop_gpu.py -p no:cacheprovider -x \
  --junitxml="$OUT/junit.xml" 2>&1 | tee "$OUT/pytest.txt" | tail -30
echo "done at $((SECONDS - t0)) s"
