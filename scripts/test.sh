#!/usr/bin/env bash
# The test command: set up, then run every test that this machine can run (GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=dev,ray,dataset bash scripts/setup.sh
# The HTML report is checked in headless Chromium; install it where we can (root on Debian), else that test skips.
command -v chromium >/dev/null || { [ "$(id -u)" = 0 ] && apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; } || true
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
exec python3 -m pytest -q "$@"
