# Sourced by the device scripts on a bare GPU machine without network: installs the carried wheels (WHEELS, .whl/ by
# default, from scripts/fetch_device_wheels.sh) into /tmp/site and exports what the project needs there. Without
# wheels the Python environment is used as it is (a machine set up with scripts/setup.sh).
if compgen -G "${WHEELS:-.whl}/*.whl" >/dev/null; then
  # installed once per machine: a second install (a script sourcing this again, beside a running job) rewrites
  # /tmp/site under that job, whose nvcc then misses CUTLASS headers
  stamp=$(ls -l "${WHEELS:-.whl}"/*.whl | md5sum | cut -d' ' -f1)
  if [ "$(cat /tmp/site/.cudal2-wheels 2>/dev/null)" != "$stamp" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      "${WHEELS:-.whl}"/*.whl || return 1
    echo "$stamp" > /tmp/site/.cudal2-wheels
  fi
  export PYTHONPATH=/tmp/site:$PWD
elif [ -f /tmp/site/.cudal2-wheels ]; then
  # a warm machine keeps what an earlier call installed: a later call need not carry the wheels again (with them and
  # the embedding model the tree would pass the 64 MiB a call carries)
  echo "device_env: no wheels in ${WHEELS:-.whl}/; using those an earlier call installed in /tmp/site" >&2
  export PYTHONPATH=/tmp/site:$PWD
else
  echo "device_env: no wheels in ${WHEELS:-.whl}/, so the installed packages are used" >&2
  export PYTHONPATH=$PWD
fi
# the retrieval's embedding model, carried packed (scripts/pack_embedding_model.py)
if [ -f "${WHEELS:-.whl}/minilm-int8.npz" ] && [ -z "${CUDAL2_EMBEDDING_MODEL:-}" ]; then
  [ -f /tmp/minilm/config.json ] || python3 scripts/pack_embedding_model.py unpack "${WHEELS:-.whl}/minilm-int8.npz" \
    /tmp/minilm >/dev/null || return 1
  export CUDAL2_EMBEDDING_MODEL=/tmp/minilm
fi
export CUDAL2_CACHE=${CUDAL2_CACHE:-/tmp/cl2cache} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  ANONYMIZED_TELEMETRY=False
