"""Probe (an earlier sweep): where a hopper_raw K-split call spends its time. For each config: host enqueue time per call,
GPU time per call from events over back-to-back calls, and one synchronised call, beside torch.matmul (cuBLAS).
Run on the GPU machine after `source scripts/device_env.sh`:  python3 docs/benchmarks/data/sweeps/split_probe.py [ONLY]
It renders hopper_raw's `split_k` knob, which exists only in the commits that measured it: f898004 (a cluster along
K, reduced through distributed shared memory; the ablations below cut that template's text) and 6863f45 (a static
workspace); check one of them out to rerun. With ONLY (an index) it makes 3 calls of that config and nothing else,
for Nsight Compute. ABLATE entries time the same kernel with parts of its K-split epilogue cut out (wrong results,
timing only), to find what costs; --ablate-only runs just those."""
import ctypes
import json
import sys
import time

import torch

from agent.families import render
from evaluator.compile import compile_many

RAW = {"group": 1, "acc": "fp32", "epi": "direct"}
CONFIGS = [  # (params, shape)
    (dict(RAW, tile_m=128, tile_n=64, stages=7, pdl=True), (128, 2048, 4096)),
    (dict(RAW, tile_m=128, tile_n=128, stages=6, split_k=8, pdl=True), (128, 2048, 4096)),
    (dict(RAW, tile_m=128, tile_n=128, stages=6, split_k=2, pdl=True), (128, 2048, 4096)),
    (dict(RAW, tile_m=128, tile_n=128, stages=6, split_k=4, pdl=True), (1000, 1000, 1000)),
    (dict(RAW, tile_m=128, tile_n=128, stages=6, pdl=True), (1000, 1000, 1000)),
    (dict(RAW, tile_m=256, tile_n=128, stages=4, split_k=4, pdl=True), (256, 2048, 16384)),
    (dict(RAW, tile_m=128, tile_n=128, stages=6, split_k=2, pdl=True), (64, 8192, 4096)),
]


SPLIT = dict(RAW, tile_m=128, tile_n=64, stages=7, split_k=4, pdl=True)
CUTS = {  # name: (text, replacement), applied in order up to and including the named cut
    "no_reduce": ("c < ROWS * CHUNKS; c += 256", "c < 0; c += 256"),
    "no_partials": ("*reinterpret_cast<float2*>(red + row * RS + col) =", "if (M < 0) *reinterpret_cast<float2*>(red + row * RS + col) ="),
    "no_partials2": ("*reinterpret_cast<float2*>(red + (row + 8) * RS + col) =", "if (M < 0) *reinterpret_cast<float2*>(red + (row + 8) * RS + col) ="),
    "no_mid_sync": ("cluster_sync();  // every partial tile", "// cluster_sync();  every partial tile"),
    "no_bar3": ('asm volatile("bar.sync 3, 256;" ::: "memory");', ""),
}
# variants of the reduction alone (each applied to the full kernel)
REDUCE = {
    "local_reads": [('"r"(local), "r"(q));', '"r"(local), "r"(krank));')],
    "no_stores": [("if (grow < M && gcol < N) {", "if (grow < M && gcol < N && sum[0] == 12345.f) {")],
    "no_wait": [("sum[i] = v[0][i];", "sum[i] = 0.f;"), ("for (int q = 1; q < SPLIT; ++q) sum[i] += v[q][i];", "")],
}


# variants of the mainloop alone (each applied on top of no_bar3)
MAINLOOP = {
    "no_cluster": [("const int krank = SPLIT > 1 ? static_cast<int>(cluster_rank()) : 0;",
                    "const int krank = blockIdx.x % SPLIT;"),
                   ("attrs[cfg.numAttrs].val.clusterDim.x = SPLIT;", "attrs[cfg.numAttrs].val.clusterDim.x = 1;")],
    "l2_promo_none": [("CU_TENSOR_MAP_L2_PROMOTION_L2_256B", "CU_TENSOR_MAP_L2_PROMOTION_NONE")],
    "l2_promo_128": [("CU_TENSOR_MAP_L2_PROMOTION_L2_256B", "CU_TENSOR_MAP_L2_PROMOTION_L2_128B")],
}
ABLATE = [(name, p, shape) for p, shape in ((SPLIT, (128, 2048, 4096)),
                                             (dict(SPLIT, tile_n=128, stages=6), (256, 2048, 16384)))
          for name in ("full", "no_reduce", "no_bar3", *REDUCE, *MAINLOOP)]


def ablated(src, name):
    if name in MAINLOOP:
        src = ablated(src, "no_bar3")
        for old, new in MAINLOOP[name]:
            assert old in src, old
            src = src.replace(old, new)
        return src
    if name in REDUCE:
        for old, new in REDUCE[name]:
            assert old in src, old
            src = src.replace(old, new)
        return src
    for cut, (old, new) in CUTS.items():
        if name == "full":
            break
        assert old in src, cut
        src = src.replace(old, new)
        if cut == name:
            break
    return src


def load(so):
    fn = ctypes.CDLL(so).hgemm
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def main():
    only = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else None
    cfgs = [CONFIGS[only]] if only is not None else CONFIGS
    if only is None and "--ablate-only" in sys.argv:
        cfgs = []
    if only is None:
        cfgs = cfgs + [(p, s) for _, p, s in ABLATE]
    srcs = [render("hopper_raw", p, s, "sm_90a") for p, s in cfgs]
    if only is None:
        n = len(ABLATE)
        srcs[-n:] = [ablated(src, name) for src, (name, _, _) in zip(srcs[-n:], ABLATE)]
        names = [""] * (len(cfgs) - n) + [name for name, _, _ in ABLATE]
    else:
        names = [""]
    infos = compile_many(sorted(set(srcs)), "sm_90a")
    for i in infos:
        assert i.ok, i.log[-2000:]
    so = {src: i.so_path for src, i in zip(sorted(set(srcs)), infos)}
    out = []
    for (p, (m, n, k)), src, name in zip(cfgs, srcs, names):
        fn = load(so[src])
        a = torch.randn(m, k, device="cuda", dtype=torch.half)
        b = torch.randn(k, n, device="cuda", dtype=torch.half)
        bc = b.t().contiguous()
        c = torch.empty(m, n, device="cuda", dtype=torch.half)
        st = torch.cuda.current_stream()
        call = lambda: fn(a.data_ptr(), b.data_ptr(), bc.data_ptr(), c.data_ptr(), m, n, k, st.cuda_stream)
        assert call() == 0
        torch.cuda.synchronize()
        err = (c.float() - a.float() @ b.float()).abs().max().item()
        if only is not None:
            call(), call()
            torch.cuda.synchronize()
            return
        reps = 200
        for _ in range(50):
            call()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            call()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(10_000_000)  # ~6 ms: the host enqueues every call before the first runs (GPU time only)
        e0.record()
        for _ in range(reps):
            call()
        e1.record()
        torch.cuda.synchronize()
        single = []
        for _ in range(20):
            s0 = time.perf_counter()
            call()
            torch.cuda.synchronize()
            single.append(time.perf_counter() - s0)
        e2, e3 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(10_000_000)
        e2.record()
        for _ in range(reps):
            torch.matmul(a, b, out=c)
        e3.record()
        torch.cuda.synchronize()
        row = {"ablation": name, "params": p, "shape": [m, n, k], "max_err": err, "enqueue_us": (t1 - t0) / reps * 1e6,
               "batch_wall_us": (t2 - t0) / reps * 1e6, "event_us": e0.elapsed_time(e1) / reps * 1e3,
               "single_sync_us": sorted(single)[10] * 1e6, "torch_event_us": e2.elapsed_time(e3) / reps * 1e3}
        print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
        out.append(row)


if __name__ == "__main__":
    main()
