#!/usr/bin/env bash
# Downloads into .whl/ (git-ignored) the cp312 wheels the GPU machine lacks, at the versions installed here:
# the CUTLASS/CuTe headers and the loop's dependencies. Carry .whl to the device; scripts/device_check.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs="nvidia-cutlass langgraph langchain-core jsonpatch jsonpointer langchain-protocol langsmith distro httpx2 httpcore2
truststore orjson pydantic annotated-types pydantic-core typing-inspection requests-toolbelt sniffio uuid-utils
websockets zstandard tenacity langgraph-checkpoint ormsgpack langgraph-prebuilt langgraph-sdk langgraph-checkpoint-sqlite
aiosqlite sqlite-vec openai jiter anthropic docstring-parser typing-extensions"
specs=()
for p in $pkgs; do
  v=$(python3 -c "import importlib.metadata as m; print(m.version('$p'))") || { echo "not installed here: $p" >&2; exit 1; }
  specs+=("$p==$v")
done
plats=()
for t in manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34 manylinux_2_35; do
  plats+=(--platform "${t}_x86_64")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plats[@]}" --platform manylinux2014_x86_64 --platform any -d .whl "${specs[@]}"
du -sh .whl
