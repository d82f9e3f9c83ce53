#!/usr/bin/env bash
# Builds into .raybundle/ (git-ignored) a trimmed Ray for the GPU machines, which cannot install packages and carry
# at most 64 MiB: ray's cp312 wheel alone is 79 MB. What a local Ray cluster with actors and tasks does not use is
# dropped (the Java jars, RLlib, Data, Serve, Tune, Train, LLM, the dashboard's web client), the rest goes into one
# .tar.xz (about 20 MB), and the cp312 wheels of Ray's dependencies that the device image lacks go beside it.
# On the device (carry .raybundle and .whl; docs/distributed.md, "Installing Ray", has the rest):
#   tar -xJf .raybundle/ray-*.tar.xz -C /tmp/site
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .raybundle/*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
RAY_VERSION=${RAY_VERSION:-2.60.0}
out=.raybundle
grep -qx '/.raybundle/' .git/info/exclude 2>/dev/null || echo '/.raybundle/' >>.git/info/exclude
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plats=()
for t in manylinux2014 manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34; do
  plats+=(--platform "${t}_x86_64")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plats[@]}" \
  -d "$tmp" "ray==$RAY_VERSION"
# Ray's Requires-Dist that the device image (KINDS.md's package list) lacks: jsonschema and its own needs
# (attrs, typing-extensions: there). Pinned to the versions installed here where they are installed.
deps=()
for p in jsonschema referencing jsonschema-specifications rpds-py; do
  v=$(python3 -c "import importlib.metadata as m; print(m.version('$p'))" 2>/dev/null) && deps+=("$p==$v") || deps+=("$p")
done
rm -f "$out"/*.whl "$out"/ray-*.tar.xz
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plats[@]}" \
  --platform any -d "$out" "${deps[@]}"
mkdir "$tmp/x"
unzip -q "$tmp"/ray-"$RAY_VERSION"-*.whl -d "$tmp/x"   # unzip keeps the executables' mode (raylet, gcs_server)
rm -rf "$tmp"/x/ray/{jars,rllib,data,serve,llm,tune,train,dashboard/client}   # ray.widgets: imported by ray._private.worker
tar -C "$tmp/x" -cf - ray "ray-$RAY_VERSION.dist-info" | xz -9 -T0 >"$out/ray-$RAY_VERSION-cp312-trimmed.tar.xz"
du -sh "$out"/*
