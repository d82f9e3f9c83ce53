# Sourced by the device scripts on a bare GPU machine without network: installs the carried wheels (.whl/, from
# scripts/fetch_device_wheels.sh) into /tmp/site and exports what the project needs there.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || return 1
export PYTHONPATH=/tmp/site:$PWD CUDAL2_CACHE=${CUDAL2_CACHE:-/tmp/cl2cache} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
