# Sourced by the device scripts on a bare GPU machine without network: installs the carried wheels (WHEELS, .whl/ by
# default, from scripts/fetch_device_wheels.sh) into /tmp/site and exports what the project needs there. Without
# wheels the Python environment is used as it is (a machine set up with scripts/setup.sh).
if compgen -G "${WHEELS:-.whl}/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "${WHEELS:-.whl}"/*.whl || return 1
  export PYTHONPATH=/tmp/site:$PWD
else
  echo "device_env: no wheels in ${WHEELS:-.whl}/, so the installed packages are used" >&2
  export PYTHONPATH=$PWD
fi
export CUDAL2_CACHE=${CUDAL2_CACHE:-/tmp/cl2cache} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
