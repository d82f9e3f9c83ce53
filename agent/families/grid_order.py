"""The tile order of hopper_raw's persistent grid: work units in bands of tile-rows, each band walked column by
column (the template's `tile_coords`), and the rules that pick a band for a grid; each rule's docstring gives the
measurements it rests on. hopper_raw's priors and cost model use them; scripts/band_check.py recounts `gpc_band`'s
picks on probe files."""
from __future__ import annotations

import functools
import math

from . import pricing
from .common import ceil_div

GROUPS = (1, 2, 4, 8, 16)  # the bands hopper_raw's `group` takes: work-unit rows per band


def orders(unit_rows: int) -> list[int]:
    """The bands that order a grid of `unit_rows` work-unit rows differently: up to the first that covers all of them
    (which walks the grid column by column; the kernel's `tile_coords` shortens the last band)."""
    return [g for g in GROUPS if g == 1 or g < 2 * unit_rows]


def bands(unit_rows: int) -> list[int]:
    """Two bands' worth: the bands a power-limited one-wave grid of four or more tile-rows was measured in
    (`one_wave_band`)."""
    return [g for g in GROUPS if g == 1 or unit_rows >= 2 * g]


def widest_band(unit_rows: int, cap: int, among: list[int] | None = None) -> int:
    """The widest band up to `cap` of `among`, by default `orders`: up to one covering all tile-rows, since beyond a
    wave every extra band is another pass over B. On nine grids of 2-6 tile-rows beyond a wave (the ping-pong prior at
    K = 512-1024, the listed 128x256 of 2^34-2^37 FLOP, one power-limited wave) the band of all of M read faster than
    two bands' worth in every mode, by 3.1-34% back to back (384x16384x1024 0.898 -> 1.056, 256x16384x16384 0.804 ->
    0.985; raw_short_grid_square_bands_h200_2026-11-27_aeeb89e.json); on five of 7-8 tile-rows for all ten priors,
    128x256 by 1.2-8.2%, 256x128 by 2.2-15% (raw_eight_row_bands_h200_2026-11-27_aeeb89e.json). On 9-31 tile-rows
    (eight fresh grids of 2^35-2^39 FLOP, H200, same rounds) the widest band read ahead of two bands' worth for all
    nine 128-row priors, by 0.1-2.5% back to back (1280x16384x6144's 128x256 in bands of 16: 0.976 -> 1.001 of best
    NVIDIA; ping-pong 0.4%) (docs/benchmarks/data/raw_band_rows_9_31_h200_2026-11-27_e0e89b9.json). Out of sample,
    the 28 priors this changed on fifteen fresh off-grid shapes of 9-30 tile-rows, old band against new in the same
    rounds: 128x256 faster on 11 of 14 back to back (geomean +0.7%, to +2.5%, worst -0.1%), 256x192 on 2 of 2 (+0.5%),
    the ping-pong tiles from -0.5% to +2.6%, and 256x128 (bands of 8 for 4) a wash: -0.3% back to back (worst -1.2%),
    +0.4% separated, -0.1% in server mode (raw_band_orders_any_height_h200_2026-11-27_e0e89b9.json)."""
    return max(g for g in (among or orders(unit_rows)) if g == 1 or g <= cap)


def square_band(tile_m: int, tile_n: int, sms: int) -> int:
    """The band (tile-rows) that makes a wave's operand footprint smallest: a wave of `sms` tiles in bands of g rows
    reads g A panels and sms/g B panels, each panel bytes proportional to its tile side, so
    g = sqrt(sms * tile_n / tile_m), as a power of two. 128x256 gets 16: on 8192x4096x16384 bands of 16 measured 0.993
    and 1.004 of cuBLASLt against 0.983 and 0.996 for bands of 8 in the same two sweeps, and 0.997 in a third; 256x192
    and 256x128 get 8."""
    g = math.sqrt(sms * tile_n / tile_m)
    return 2 ** round(math.log2(g))


# CTAs launched one after another that a band should keep to few operand panels (`gpc_band`): near a GPC's SMs (132
# SMs in 8 GPCs on an H100 or H200), fitted on the three band probes (49 grids, each in 2-4 bands): the pick's shortfall
# from the fastest band measured, geomean back to back, was 0.01% and 0.45% for 12 against 0.11% and 0.75% for 16 and
# 0.07% and 0.45% for 8 (16 and 8 tie 128x64's bands 2 and 4 or 128x128's, where 2 and 4 measured best respectively);
# `scripts/band_check.py PROBES --runs 8,16` recounts it on any probe of bands
GPC_CTAS = 12
# The time of a grid `hopper_raw._gpc_banded` names, below the power limit, against rows, as its runs' operand panels
# (`run_panels`) against rows' to this power (set on one-wave grids): bands of two read 0.3-5.7% faster back to back
# with 0.59-0.67 of rows' panels on the probe of `gpc_band` (2% at 0.59: 0.03), 8 tile-rows of 128x64 with 1.5 times
# rows' panels 26% slower
GPC_PANEL_EXP = 0.06
# 128-row tile widths whose grids were measured in bands (`gpc_band`; 64-row tiles were not), and the waves: on five
# two-wave grids of 128x64 and 128x128 (K = 2112-3648) the band picked read 3.7-23% faster than rows back to back
# and 3.4-21% in server mode, on five one-wave grids of the cooperative 128x176 0.1-15% and -0.2% to +17%
# (docs/benchmarks/data/raw_gpc_band_two_waves_176_h200_2026-11-27_00b0b9f.json); beyond two waves see
# `hopper_raw._gpc_banded`
GPC_BAND_WIDTHS = (64, 128, 176, 256)
GPC_BAND_WAVES = 2


def gpc_band(rows: int, cols: int, tile_m: int, tile_n: int, b_bytes: int = 0, sms: int = 132) -> int:
    """The band (tile-rows) of a grid whose runs of GPC_CTAS consecutive work units (the kernel's tile order,
    `tile_coords`; a persistent CTA's next unit is a wave further, so a wave's runs are runs of units too) read the
    fewest operand bytes: each run's distinct tile-rows times tile_m plus its distinct tile-columns times tile_n, summed
    over the runs; ties go to the narrower band. On one wave every tile is resident at once, so the order only places
    tiles, yet CTAs launched next to each other that share an operand's tile make the L2 serve fewer sectors: on
    512x4096x4096 (128x128, H200, Nsight Compute) rows of tiles read 7.9M, bands of 2 6.7M, of 4 6.0M (nvjet, in 2-CTA
    clusters, 4.2M). Against rows, on twelve one-wave shapes fresh to the question (H200, same rounds, best NVIDIA;
    128x64, 128x128, 128x256 tiles, K = 128-12288), bands of 2 read faster on 12 of 12 back to back (0.3-5.7%), 12 of 12
    separated and 11 of 12 in server mode (to 11%, one 0.1% slower); where both ran, 4 against 2 read -0.1% to +0.7% on
    the 128x128 and 128x256 tiles and 0.9-2% behind on 128x64 (back to back), as the count says; 8 rows of 128x64 on an
    8-column grid read 26% below rows back to back (docs/benchmarks/data/raw_gpc_band_h200_2026-11-27_7d6dff4.json).

    Any band up to one covering all tile-rows (`orders`; a band of all of M walks the grid column by column), and
    first the fewest passes over B (`b_passes`: beyond a wave, where B outgrows the L2). On eleven short grids fresh
    to the question (2-7 tile-rows of wide N, 16-60 MiB of B; H200, same rounds), the pick read faster than the old
    order (rows where the grid had fewer than four tile-rows, else two bands' worth) for the 15 of 17 priors whose
    band changes, in every mode, by 0.3-36% back to back (geomean 10.4%; ping-pong 128x128 on 2-3 tile-rows 24% and
    36%), and missed the fastest band by 1.1% and 0.5% on the other two; on 6 of the 10 grids whose order changed it
    read ahead of the policy's first proposal (CUTLASS) in every mode, in server mode by 3.9-7.5%
    (docs/benchmarks/data/raw_short_grid_bands_h200_2026-11-27_852a1b4.json). On seven one-wave grids of 4-7
    tile-rows, the nine priors it puts in bands of 4 or 8 (all of M) read ahead of bands of 2 by -0.15% to +11% back to
    back (geomean 1.4%; server 2.0%) and of rows by 0.4-31% (576x2816x14144's 128x128: 0.833 of best NVIDIA against
    0.751 and 0.637; raw_band_rows_9_31_h200_2026-11-27_e0e89b9.json)."""
    return min(orders(rows), key=lambda g: (b_passes(rows, cols, g, b_bytes, sms),
                                             run_panels(rows, cols, g, tile_m, tile_n), g))


def b_passes(rows: int, cols: int, group: int, b_bytes: int, sms: int) -> int:
    """How many times a grid in bands of `group` tile-rows reads B from DRAM: once a band where the grid takes more
    than a wave (a band's columns come round again a wave or more later) and B outgrows the L2 (`pricing.outgrows_l2`),
    else once. With the L2's size as the bound, the short grids' probes agree: B of 60 MiB on 4 tile-rows of 128x64,
    the band of all 4 read 7.1% faster than bands of 2 back to back; of 32-39 MiB on 5-6 tile-rows, one band of all of
    M read 1.9-12% slower than the panel count's bands of 2, and of 36 MiB on 4 tile-rows 1.1% faster
    (docs/benchmarks/data/raw_short_grid_bands_h200_2026-11-27_852a1b4.json,
    short_grid_bands_first_batch_ab_h200_2026-11-27_8b04754.json)."""
    return ceil_div(rows, group) if rows * cols > sms and pricing.outgrows_l2(b_bytes) else 1


def tile_order(rows: int, cols: int, group: int) -> list[tuple[int, int]]:
    """(tile-row, tile-column) of each work unit in the kernel's order, bands of `group` tile-rows walked column by
    column: the template's `tile_coords`, spelt in Python."""
    coords = []
    for t in range(rows * cols):
        first = t // (group * cols) * group
        height = min(group, rows - first)
        r = t - first * cols
        coords.append((first + r % height, r // height))
    return coords


@functools.lru_cache(maxsize=4096)
def run_panels(rows: int, cols: int, group: int, tile_m: int, tile_n: int) -> int:
    """The operand panel bytes (in tile sides) that each run of GPC_CTAS consecutive work units touches, summed over
    the runs, for the kernel's tile order (`tile_order`) in bands of `group` tile-rows. Cached: `estimate_us` asks for
    the same grid's count for every candidate of a shape (a walk of up to two waves' tiles each time)."""
    coords = tile_order(rows, cols, group)
    runs = (coords[i:i + GPC_CTAS] for i in range(0, len(coords), GPC_CTAS))
    return sum(len({a for a, _ in run}) * tile_m + len({b for _, b in run}) * tile_n for run in runs)


def one_wave_band(rows: int, tile_m: int, tile_n: int, tiles: int) -> int:
    """The tile order of a grid that runs in one wave, where every tile is resident at once and the order only decides
    which CTAs are launched next to each other: in bands (neighbours down M, sharing B's tile) where B's tile is the
    wider, else along N (sharing A's). Power-steady on an H200 (two sweeps): 1024x4096x8192 with 128x256 tiles,
    bands of 2 or 4 tile-rows 0.998-0.999 of cuBLASLt against 0.967 for rows (their loads alone: 30 against 43 mJ a
    call), 1.011 against 0.984 with the B/C evict_first hint; 4096x1024x12288, bands of 16 0.999 against 0.995 for
    128x256, and rows 0.985 against 0.972-0.979 for bands of 4-8 of 256x128. On fewer than four tile-rows a band of
    all of M: 256x16384x16384 read 0.985 against 0.804 in rows
    (raw_short_grid_square_bands_h200_2026-11-27_aeeb89e.json); on 4-8 the bands measured, two bands' worth."""
    if tile_n <= tile_m:
        return 1
    return widest_band(rows, square_band(tile_m, tile_n, tiles), orders(rows) if rows < 4 else bands(rows))
