"""Nsight Compute's raw CSV (`ncu --csv --page raw`) → compact per-kernel records, and ncu's failures → reasons.

Pure text processing, no GPU: CI parses real captured outputs (tests/golden/ncu/).

The raw page has one header row (fixed columns such as "ID", "Kernel Name", "Block Size", then one column per
metric), one row of units, and one row per profiled kernel launch. Values can carry thousands separators and
"n/a"; units depend on --print-units, so every value is brought to one unit per quantity here (µs, bytes, %).
"""
from __future__ import annotations

import csv
import io
import re
from typing import Any

# The metric set. Short name → ncu metric. Chosen so that a reader (or a model) can tell what limits a GEMM:
# speed-of-light throughputs, cache hit rates, occupancy (achieved, theoretical and what limits it), tensor-pipe
# activity, issue activity, warp-stall breakdown, resources per launch, local-memory (spill) traffic, and
# shared-memory bank conflicts against the wavefronts they add to.
METRICS: dict[str, str] = {
    "duration": "gpu__time_duration.sum",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1_throughput_pct": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "l2_throughput_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    # On Hopper this counts wgmma (HGMMA) as well as mma.sync (HMMA): one metric for both generations.
    "tensor_pipe_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "registers_per_thread": "launch__registers_per_thread",
    "smem_static_bytes": "launch__shared_mem_per_block_static",
    "smem_dynamic_bytes": "launch__shared_mem_per_block_dynamic",
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "sm_count": "launch__sm_count",
    "limit_registers": "launch__occupancy_limit_registers",
    "limit_shared_mem": "launch__occupancy_limit_shared_mem",
    "limit_warps": "launch__occupancy_limit_warps",
    "limit_blocks": "launch__occupancy_limit_blocks",
    "local_ld_sectors": "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
    "local_st_sectors": "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "smem_ld_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smem_st_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smem_ld_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "smem_st_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    # wgmma reads its operands from shared memory itself (Hopper); other GPUs lack these and leave them out.
    "smem_gmma_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum",
    "smem_gmma_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_gmma.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "sm_clock_hz": "sm__cycles_elapsed.avg.per_second",
}
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
                 "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
                 "not_selected", "selected", "short_scoreboard", "sleeping", "tex_throttle", "wait")
# "selected" is the issuing warp itself and "not_selected" an eligible warp that lost arbitration: neither is a
# stall that says what to fix.
NOT_A_STALL = ("selected", "not_selected")
TOP_STALLS = 4
SECTOR_BYTES = 32


def metric_names() -> list[str]:
    return list(METRICS.values()) + [STALL_PREFIX + r + STALL_SUFFIX for r in STALL_REASONS]


class NcuParseError(ValueError):
    pass


# ---- values and units -----------------------------------------------------------------------------------------
_NUM = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)(\.\d*)?([eE][+-]?\d+)?$")
_SCALE = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def number(text: str) -> float | None:
    """'1,234.5' → 1234.5; 'n/a', '' and anything not a number → None."""
    t = (text or "").strip()
    if not _NUM.match(t):
        return None
    return float(t.replace(",", ""))


def to_unit(value: float | None, unit: str, quantity: str) -> float | None:
    """Bring a value to µs (time), bytes (size) or Hz (frequency); other units pass through."""
    if value is None:
        return None
    u = (unit or "").split("/")[0].strip()
    if quantity == "time":
        if u not in _TIME:
            raise NcuParseError(f"unexpected time unit {unit!r}")
        return value * _TIME[u]
    if quantity == "bytes":
        m = re.fullmatch(r"([kKMGT]?)(i?)byte|([kKMGT]?)(i?)B", u)
        if not u or m is None:
            return value
        pre, binary = (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3), m.group(4))
        return value * ((1024.0 ** " KMGT".index(pre.upper())) if binary else _SCALE[pre])
    if quantity == "hz":
        m = re.fullmatch(r"([kKMGT]?)(hz|Hz|cycle|cycles)", u)
        return value * _SCALE[m.group(1)] if m else value
    return value


_QUANTITY = {"duration": "time", "smem_static_bytes": "bytes", "smem_dynamic_bytes": "bytes",
             "dram_read_bytes": "bytes", "dram_write_bytes": "bytes", "sm_clock_hz": "hz"}


# ---- the CSV ---------------------------------------------------------------------------------------------------
def csv_block(text: str) -> str:
    """The CSV part of ncu's output: from the header row on, without ==PROF==/==WARNING== lines mixed in."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise NcuParseError("no CSV header (a line starting with \"ID\") in ncu's output")
    return "\n".join(ln for ln in lines[start:] if ln.startswith('"'))


def parse_raw_csv(text: str) -> tuple[list[str], dict[str, str], list[dict[str, str]]]:
    """(header, units by column, one dict per kernel row)."""
    rows = list(csv.reader(io.StringIO(csv_block(text))))
    header = rows[0]
    if len(set(header)) != len(header):
        raise NcuParseError("duplicate columns in ncu's CSV header")
    body = rows[1:]
    units: dict[str, str] = {}
    # The units row has an empty ID; the first kernel row's ID is a number.
    if body and not body[0][0].strip():
        units = dict(zip(header, body[0]))
        body = body[1:]
    kernels = []
    for r in body:
        if len(r) != len(header):
            raise NcuParseError(f"a CSV row has {len(r)} fields, the header {len(header)}")
        kernels.append(dict(zip(header, r)))
    return header, units, kernels


def _dim3(text: str) -> list[int] | None:
    nums = re.findall(r"\d+", text or "")
    return [int(x) for x in nums] if nums else None


def kernel_record(row: dict[str, str], units: dict[str, str]) -> dict[str, Any]:
    """One profiled launch → a flat record with short names, plus its stall breakdown."""
    def get(metric: str, quantity: str | None = None) -> float | None:
        if metric not in row:
            return None
        v = number(row[metric])
        return to_unit(v, units.get(metric, ""), quantity) if quantity else v

    rec: dict[str, Any] = {"id": int(number(row.get("ID", "")) or 0), "name": row.get("Kernel Name", "").strip(),
                           "pid": int(number(row.get("Process ID", "")) or 0) or None,
                           "block": _dim3(row.get("Block Size", "")), "grid": _dim3(row.get("Grid Size", ""))}
    for short, metric in METRICS.items():
        rec[short] = get(metric, _QUANTITY.get(short))
    rec["duration_us"] = rec.pop("duration")
    for k in ("registers_per_thread", "grid_size", "block_size", "sm_count", "limit_registers", "limit_shared_mem",
              "limit_warps", "limit_blocks"):
        if rec[k] is not None:
            rec[k] = int(rec[k])
    smem = [v for v in (rec.pop("smem_static_bytes"), rec.pop("smem_dynamic_bytes")) if v is not None]
    rec["smem_per_block_bytes"] = int(sum(smem)) if smem else None
    loc = [v for v in (rec.pop("local_ld_sectors"), rec.pop("local_st_sectors")) if v is not None]
    rec["spill_bytes"] = int(sum(loc) * SECTOR_BYTES) if loc else None
    conf = [v for v in (rec.pop("smem_ld_conflicts"), rec.pop("smem_st_conflicts"), rec.pop("smem_gmma_conflicts"))
            if v is not None]
    wave = [v for v in (rec.pop("smem_ld_wavefronts"), rec.pop("smem_st_wavefronts"),
                        rec.pop("smem_gmma_wavefronts")) if v is not None]
    rec["bank_conflicts"] = int(sum(conf)) if conf else None
    # Share of shared-memory wavefronts that exist only because of conflicts (0 = conflict-free).
    rec["bank_conflict_pct"] = (100.0 * sum(conf) / sum(wave) if sum(wave) > 0 else 0.0) if conf and wave else None
    rd, wr = rec.pop("dram_read_bytes"), rec.pop("dram_write_bytes")
    rec["dram_bytes"] = int(rd + wr) if rd is not None and wr is not None else None
    hz = rec.pop("sm_clock_hz")
    rec["sm_clock_mhz"] = round(hz / 1e6, 1) if hz else None
    limits = {k[len("limit_"):]: rec.pop(k) for k in ("limit_registers", "limit_shared_mem", "limit_warps",
                                                      "limit_blocks")}
    rec["occupancy_limits"] = {k: v for k, v in limits.items() if v is not None}  # blocks per SM each allows
    stalls = {}
    for col, val in row.items():
        if col.startswith(STALL_PREFIX) and col.endswith(STALL_SUFFIX):
            v = number(val)
            if v is not None:
                stalls[col[len(STALL_PREFIX):-len(STALL_SUFFIX)]] = v
    rec["stalls"] = stalls
    return rec


def top_stalls(stalls: dict[str, float], n: int = TOP_STALLS) -> list[tuple[str, float]]:
    """The n largest real stall reasons (cycles per issued instruction), largest first."""
    real = [(k, v) for k, v in stalls.items() if k not in NOT_A_STALL and v > 0]
    return sorted(real, key=lambda kv: -kv[1])[:n]


def occupancy_limiter(limits: dict[str, int]) -> str | None:
    """Which resource allows the fewest blocks per SM ('registers', 'shared_mem', 'warps', 'blocks')."""
    if not limits:
        return None
    return min(limits, key=lambda k: (limits[k], ("blocks", "warps", "registers", "shared_mem").index(k)
                                      if k in ("blocks", "warps", "registers", "shared_mem") else 9))


SUMMARY_KEYS = ("sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "l1_throughput_pct",
                "l2_throughput_pct", "l1_hit_rate_pct", "l2_hit_rate_pct", "achieved_occupancy_pct",
                "theoretical_occupancy_pct", "tensor_pipe_pct", "issue_active_pct", "registers_per_thread",
                "smem_per_block_bytes", "spill_bytes", "bank_conflict_pct", "grid_size", "block_size",
                "waves_per_sm", "sm_count", "dram_bytes", "sm_clock_mhz")


def summarize(kernels: list[dict[str, Any]]) -> dict[str, Any]:
    """The compact record: summed duration over all launches; every other top-level metric is the longest
    launch's (the GEMM itself, when a candidate also launches a small zero-fill or reduction kernel)."""
    if not kernels:
        raise NcuParseError("no kernel rows to summarise")
    main = max(kernels, key=lambda k: k.get("duration_us") or 0.0)
    durs = [k["duration_us"] for k in kernels if k.get("duration_us") is not None]
    out: dict[str, Any] = {"n_kernels": len(kernels), "duration_us": round(sum(durs), 3) if durs else None,
                           "main_kernel": short_name(main["name"]),
                           "main_kernel_duration_us": main.get("duration_us")}
    for k in SUMMARY_KEYS:
        v = main.get(k)
        out[k] = round(v, 2) if isinstance(v, float) else v
    out["occupancy_limiter"] = occupancy_limiter(main.get("occupancy_limits", {}))
    ts = top_stalls(main.get("stalls", {}))
    # A string, so that prompt renderers that show only scalar fields still show it.
    out["top_stalls"] = ", ".join(f"{k} {v:.2f}" for k, v in ts) if ts else None
    out["kernels"] = kernels
    return out


def short_name(name: str, limit: int = 120) -> str:
    """A demangled kernel name without its argument list, bounded in length (cuBLAS names run to kilobytes)."""
    s = name.strip()
    depth, cut = 0, None
    for i, ch in enumerate(s):  # the argument list is the last top-level '(...)'
        if ch in "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    s = s[:cut] if cut else s
    return s if len(s) <= limit else s[: limit - 3] + "..."


# ---- failures ---------------------------------------------------------------------------------------------------
_FAILURES = (
    ("ERR_NVGPUCTRPERM", "GPU performance counters are not accessible to this user (ERR_NVGPUCTRPERM); run as "
                         "root or load the driver with NVreg_RestrictProfilingToAdminUsers=0"),
    ("LibraryNotLoaded", "ncu could not inject its profiling library into the target (LibraryNotLoaded; "
                         "sandboxed runtimes such as gVisor do not support it)"),
    ("ERR_NVGPUCTRBUSY", "the GPU performance counters are in use by another profiler (ERR_NVGPUCTRBUSY)"),
    ("Profiling is not supported on this device", "this ncu does not support profiling on this GPU"),
    ("No kernels were profiled", "ncu profiled no kernel: nothing was launched inside the profiling range"),
)


def missing_metrics(header: list[str], requested: list[str]) -> list[str]:
    """Requested metrics without a column. ncu (2025.x) leaves a metric this GPU or version lacks out of the
    report without an error, so absence is the only sign; the record lists them."""
    have = set(header)
    return [m for m in requested if m not in have]


def failure_reason(text: str) -> str | None:
    """A readable reason when ncu's output says counters/injection are unavailable; None when it does not."""
    for needle, reason in _FAILURES:
        if needle in text:
            return reason
    return None


def error_lines(text: str, limit: int = 4) -> str:
    errs = [ln.strip() for ln in text.splitlines() if ln.startswith("==ERROR==")]
    return " | ".join(errs[:limit])[:600]


def ncu_version(text: str) -> str | None:
    m = re.search(r"Version\s+(\d[\w.]*)", text)
    return m.group(1) if m else None
