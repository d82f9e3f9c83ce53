# one device call (carry scratch/lw, scratch/ncud): Nsight Compute of the dev sample's misses, each beside the fastest
# NVIDIA baseline; every output goes into one tarball (the device returns eight files at most)
export WHEELS=scratch/lw; . scripts/device_env.sh >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv,noheader
mkdir -p /tmp/ncu
for f in scratch/ncud/*.cu; do
  b=$(basename $f .cu); s=$(echo $b | cut -d_ -f1 | tr x ' ')
  timeout 150 python3 -m agent.cli profile $f --shape $s --json /tmp/ncu/$b.json > /tmp/ncu/$b.txt 2>&1
  echo "== $b rc=$?"; tail -4 /tmp/ncu/$b.txt
done
tar czf $OUT/ncu.tgz -C /tmp ncu
