"""Captures the golden Nsight Compute outputs in this folder, on a GPU machine (run from the repository root):

    CUDAL2_CACHE=/tmp/cl2cache python tests/golden/ncu/capture.py OUTDIR

Each profile is a real ncu run through evaluator.profile (the same command line the evaluator uses); its full
output is kept as OUTDIR/<name>.txt, the parsed record as OUTDIR/<name>.json. Also kept: ncu's answer to a metric
it does not know (unknown_metric.txt), the versions, and which of the metric set this ncu/GPU offers.
"""
import json
import subprocess
import sys
from pathlib import Path

from evaluator.api import evaluate
from evaluator.pool import WorkerPool
from evaluator.profile import _command, _run, ncu_path, profile_baseline, profile_target

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    exe = ncu_path()
    ver = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv"],
                         capture_output=True, text=True).stdout
    (out / "versions.txt").write_text(ver + "\n" + smi)
    q = subprocess.run([exe, "--query-metrics"], capture_output=True, text=True, timeout=120).stdout
    from evaluator.ncu_parse import metric_names

    bases = {m.split(".")[0] for m in metric_names()}
    have = {ln.split()[0] for ln in q.splitlines() if ln.strip() and ln.split()[0] in bases}
    # launch__* and sm__maximum_warps_per_active_cycle_pct are launch attributes: reported, but not listed here.
    (out / "metric_availability.json").write_text(json.dumps({"offered": sorted(have),
                                                              "not_listed": sorted(bases - have)}, indent=1))
    (out / "query_tensor_metrics.txt").write_text("\n".join(ln for ln in q.splitlines() if "tensor" in ln or "gmma" in ln))
    pool = WorkerPool(gpus=[0])
    native = pool.native_so()
    jobs = [("wmma_1024", "reference_wmma.cu", (1024, 1024, 1024)), ("wmma_64", "reference_wmma.cu", (64, 64, 64)),
            ("naive_512", "reference_naive.cu", (512, 512, 512)), ("wmma_ragged", "reference_wmma.cu", (77, 130, 200))]
    sos = {}
    for name, kernel, shape in jobs:
        r = evaluate((KERNELS / kernel).read_text(), shape, pool=pool)
        print(name, r.status, r.reason[:200], flush=True)
        sos[name] = r.compile.so_path
        rec = profile_target(r.compile.so_path, shape, native, raw_out=out / f"{name}.txt")
        (out / f"{name}.json").write_text(json.dumps(rec, indent=1))
        print(name, rec.get("available"), rec.get("reason"), rec.get("bottleneck"), flush=True)
    for which in ("cublaslt-heuristic-NN", "cublas-TN", "cublaslt-autotune-NN"):
        name = "baseline_" + which.replace("-", "_") + "_1024"
        rec = profile_target(f"baseline:{which}", (1024, 1024, 1024), native, raw_out=out / f"{name}.txt")
        (out / f"{name}.json").write_text(json.dumps(rec, indent=1))
        print(name, rec.get("available"), rec.get("reason"), rec.get("bottleneck"), flush=True)
    rec = profile_baseline((1024, 1024, 1024), native)
    print("cached baseline", rec.get("available"), rec.get("cached"), flush=True)
    # ncu's answer to a metric it does not know
    cmd = _command(exe, ["gpu__time_duration.sum", "sm__no_such_metric_cudal2.sum"], native, sos["wmma_64"],
                   (64, 64, 64), "fp32", str(out / "unknown_status.json"))
    rc, text = _run(cmd, 120, None)
    (out / "unknown_metric.txt").write_text(text)
    print("unknown metric run rc", rc, flush=True)
    # the CLI, as a user runs it
    import argparse

    from evaluator.profile_cli import add_subcommands

    ap = argparse.ArgumentParser()
    add_subcommands(ap.add_subparsers(dest="command"))
    a = ap.parse_args(["profile", str(KERNELS / "reference_wmma.cu"), "--shape", "2048", "2048", "2048",
                       "--json", str(out / "cli_wmma_2048.json")])
    print("cli exit", a.func(a), flush=True)
    pool.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
