"""Probe (an earlier sweep): where a hopper_raw call spends its energy at the power limit. Renders one hopper_raw config and
cuts parts out of its text, so that each probe leaves out one kind of work (wrong results, timing only):

- no_mma: the consumers wait for every stage and hand it back, but issue no wgmma (loads + stores + barriers);
- no_load: the producer arrives on each stage's barrier without a TMA load (the MMAs read stale shared memory);
- no_store: the epilogue writes its sub-tiles to shared memory but never stores them to C;
- loads_only: no_mma and no_store; mma_only: no_load and no_store.

Writes the .cu files and a spec for scripts/sustained_power.py (each probe a {"file", "probe"} target; the full
kernel as a checked family target) into OUT:

    python3 docs/benchmarks/data/sweeps/energy_probes.py OUT [first|pairs|structure]
    python3 scripts/sustained_power.py OUT/spec.json --out OUT/result --separator
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from agent.families import render  # noqa: E402

ONE_WAVE = {"tile_m": 128, "tile_n": 256, "stages": 4, "group": 1, "epi": "tma", "acc": "fp32", "pdl": True}
# shape: {variant: (params, the probes cut from it)}; the first round measured an earlier run's best hopper_raw configs, the
# second (--pairs) the same with 2-CTA clusters that multicast B, whose L2 reads they halve
ROUNDS = {
    "first": {
        (1024, 4096, 8192): {"full": (ONE_WAVE, "all")},
        (8192, 2048, 8192): {"full": (dict(ONE_WAVE, group=16, grid="even"), "all")},
    },
    "pairs": {
        (1024, 4096, 8192): {"full": (ONE_WAVE, ("loads_only",)),
                             "pair": (dict(ONE_WAVE, cluster_m=2), ("loads_only", "mma_only"))},
        (4096, 1024, 12288): {"full": (ONE_WAVE, ("loads_only",)),
                              "pair": (dict(ONE_WAVE, cluster_m=2), ("loads_only",))},
    },
    # the third: the tile order (bands of 4 tile-rows, the CTAs of a band sharing B) and the 256x128 tile, whose
    # consumers each run two m64n128 atoms as cuBLASLt's nvjet kernel does in its own (transposed) orientation
    "structure": {
        (1024, 4096, 8192): {"full": (ONE_WAVE, ("mma_only",)),
                             "g4": (dict(ONE_WAVE, group=4), ("loads_only",)),
                             "t256x128": (dict(ONE_WAVE, tile_m=256, tile_n=128), ("mma_only", "loads_only"))},
    },
}

# an earlier run's winner on the one-wave shape (CUTLASS's collective), for scale
EXTRA = {(1024, 4096, 8192): {"cutlass_r34": {"family": "hopper_wgmma", "params": {
    "pdl": True, "epi_n": 64, "tile_m": 128, "tile_n": 256, "tile_k": 64, "cluster_m": 1, "cluster_n": 1,
    "schedule": "cooperative", "scheduler": "persistent", "splits": 1, "raster": "along_m", "swizzle": 4,
    "stages": 0, "b_operand": "col", "swap_ab": False, "acc": "fp32"}}}}

MMA = "for (int a = 0; a < ATOMS; ++a) wgmma(acc[a], da + a * (64 * 128 >> 4) + 2 * k, db + 2 * k, kb > 0 || k > 0);"
LOAD_START = "bar_expect_tx(full(s), STAGE_BYTES);"
LOAD_END = "if (++s == STAGES) {"
STORE = "if (threadIdx.x % 128 == 0) {\n            if constexpr (EVICT_C)"


def cut(src: str, what: str) -> str:
    """The source with one kind of work left out; raises if the template's text moved (the probe would be void)."""
    if what == "no_mma":
        assert src.count(MMA) == 1, "the wgmma issue line moved"
        return src.replace(MMA, "(void)da; (void)db;")
    if what == "no_load":
        i = src.index(LOAD_START)
        j = src.index(LOAD_END, i)
        return src[:i] + "bar_arrive(full(s));  // probe: no TMA load\n          " + src[j:]
    if what == "no_store":
        assert src.count(STORE) == 1, "the epilogue's store moved"
        return src.replace(STORE, "if (false) {\n            if constexpr (EVICT_C)")
    raise ValueError(what)


PROBES = {"no_mma": ["no_mma"], "no_load": ["no_load"], "no_store": ["no_store"],
          "loads_only": ["no_mma", "no_store"], "mma_only": ["no_load", "no_store"]}


def main(out: Path, rnd: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    spec = {}
    for shape, variants in ROUNDS[rnd].items():
        key = "x".join(map(str, shape))
        targets = dict(EXTRA.get(shape, {}) if rnd == "first" else {})
        for variant, (params, probes) in variants.items():
            src = render("hopper_raw", params)
            targets[variant] = {"family": "hopper_raw", "params": params}
            for name in PROBES if probes == "all" else probes:
                s = src
                for c in PROBES[name]:
                    s = cut(s, c)
                label = name if variant == "full" else f"{variant}_{name}"
                f = f"{key}_{label}.cu"
                (out / f).write_text(s)
                why = f"hopper_raw {json.dumps(params)} with {' and '.join(PROBES[name])}"
                targets[label] = {"file": f, "probe": why}
        spec[key] = targets
    (out / "spec.json").write_text(json.dumps(spec, indent=1))
    print(out / "spec.json")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "first")
