#!/usr/bin/env bash
# Downloads into .whl/ (git-ignored) the cp312 wheels the GPU machine lacks, at the versions installed here: the
# CUTLASS/CuTe headers, the loop's dependencies and chromadb's (retrieval), plus the embedding model packed to int8
# (scripts/pack_embedding_model.py). Carry .whl to the device (about 60 MiB: the carry limit is 64 MiB with the
# working tree); scripts/device_env.sh installs them. Left out for room: zstandard (5.5 MiB; httpx and langsmith
# import it only if it is there) and anthropic (2.7 MiB; the GPU runs use OpenAI-protocol servers, and the tests
# that need it are skipped there). grpcio and protobuf, which chromadb's telemetry imports, are on the device already.
#   bash scripts/fetch_device_wheels.sh [--no-retrieval]
# --no-retrieval: without chromadb, its telemetry packages and the embedding model (15 MiB in all, not 58): the built-in
# policy's campaigns and every GPU test but retrieval's need none of them, and the room goes to a prebuilt compile cache
# (scripts/prebuild_first_batches.py).
set -euo pipefail
cd "$(dirname "$0")/.."
retrieval=1
if [ "${1:-}" = --no-retrieval ]; then retrieval=0; shift; fi
[ $# -eq 0 ] || { echo "usage: $0 [--no-retrieval]" >&2; exit 2; }
pkgs="nvidia-cutlass langgraph langchain-core jsonpatch jsonpointer langchain-protocol langsmith distro httpx2 httpcore2
truststore orjson pydantic annotated-types pydantic-core typing-inspection requests-toolbelt sniffio uuid-utils
websockets tenacity langgraph-checkpoint ormsgpack langgraph-prebuilt langgraph-sdk langgraph-checkpoint-sqlite
aiosqlite sqlite-vec openai jiter typing-extensions
chromadb python-dotenv jsonschema jsonschema-specifications referencing rfc3339-validator rpds-py opentelemetry-api
opentelemetry-sdk opentelemetry-semantic-conventions overrides pybase64 pydantic-settings
opentelemetry-exporter-otlp-proto-grpc opentelemetry-exporter-otlp-proto-common opentelemetry-proto
googleapis-common-protos opentelemetry-exporter-otlp-common"
if [ $retrieval = 0 ]; then
  pkgs=$(for p in $pkgs; do case $p in chromadb|opentelemetry-*) ;; *) echo "$p" ;; esac; done)
  rm -f .whl/chromadb-*.whl .whl/opentelemetry_*.whl .whl/minilm-int8.npz  # left by an earlier full fetch
fi
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
# CUTLASS's examples (1.6 MiB compressed) are neither compiled against nor ingested: dropped to fit the carry limit
python3 - .whl/nvidia_cutlass-*.whl <<'PY'
import os, sys, zipfile
src = sys.argv[1]
drop = "cutlass_library/source/examples/"
with zipfile.ZipFile(src) as z:
    if not any(n.startswith(drop) for n in z.namelist()):
        sys.exit(0)
    with zipfile.ZipFile(src + ".tmp", "w", zipfile.ZIP_DEFLATED) as out:
        for i in z.infolist():
            if i.filename.startswith(drop):
                continue
            data = z.read(i)
            if i.filename.endswith(".dist-info/RECORD"):
                data = b"".join(l for l in data.splitlines(True) if not l.startswith(drop.encode()))
            out.writestr(i, data)
os.replace(src + ".tmp", src)
PY
[ $retrieval = 0 ] || [ -f .whl/minilm-int8.npz ] || python3 scripts/pack_embedding_model.py pack .whl/minilm-int8.npz
du -sh .whl
