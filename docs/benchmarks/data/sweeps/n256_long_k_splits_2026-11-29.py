"""One-off probe behind docs/benchmarks/data/n256_long_k_splits_h200_2026-11-29_*.json (run from the repository root
on a GPU machine; OUT, DEADLINE_S). Outputs of N = 256 (and one of 384) with M = 512-2048 and K = 8192-16384, where
the wgmma family's batched split (two launches) wins back to back but loses in server mode (1024x256x8192: server
0.945 of best NVIDIA, NVIDIA's kernel a one-launch split of 64x128 tiles). Each shape's policy batch (the wgmma
family's first two priors and hopper_raw's cluster split prior, if any) beside hopper_raw's one-launch splits of
other tiles and cluster sizes, all in the same rounds, server and back to back, twice; the candidate (checked) is the
wgmma family's first prior, the rest are rivals (hopper_raw's cluster splits passed every check on such shapes
before: docs/benchmarks/data/raw_skinny_cluster_split_h200_2026-11-27_056c001.json)."""
import json, os, sys, time
sys.path.insert(0, '.')
from pathlib import Path
from agent.families import get
from agent.families.hopper_raw import DOMAIN, _k_deep, feasible
from agent.families.common import ceil_div
from evaluator.api import evaluate
from evaluator.compile import compile_many
from evaluator.record import BEST_NVIDIA

SHAPES = [(1024, 256, 8192), (2048, 256, 8192), (1024, 256, 12288), (512, 256, 16384), (768, 384, 8192)]
out = Path(os.environ.get('OUT', '/tmp')) / 'n256_long_k_splits.json'
deadline = time.monotonic() + float(os.environ.get('DEADLINE_S', '420'))


def players(shape):
    hw, hr = get('hopper_wgmma'), get('hopper_raw')
    ps = {f'hw{i}': ('hopper_wgmma', p) for i, p in enumerate(hw.priors(shape, 'fp32')[:2])}
    for i, p in enumerate(hr.priors(shape, 'fp32')[:1]):
        ps['hr_prior'] = ('hopper_raw', p)
    for tm, tn in ((128, 128), (64, 128), (128, 64)):
        for ck in (2, 3, 4, 5, 6):
            base = {'tile_m': tm, 'tile_n': tn, 'group': 1, 'acc': 'fp32', 'epi': 'direct', 'cluster_k': ck, 'pdl': True}
            p = _k_deep(base, ceil_div(ceil_div(shape[2], 64), ck), DOMAIN['stages'])
            tiles = ceil_div(shape[0], tm) * ceil_div(shape[1], tn)
            same = [q for _, q in ps.values() if (q.get('tile_m'), q.get('tile_n'), q.get('cluster_k')) == (tm, tn, ck)]
            if tiles * ck >= 48 and feasible(p, shape, 'sm_90a')[0] and not same:
                ps[f'hr_{tm}x{tn}_k{ck}_s{p["stages"]}'] = ('hopper_raw', p)
    return {k: (fam, p, get(fam).render(p)) for k, (fam, p) in ps.items()}


rows = []
table = [(s, players(s)) for s in SHAPES]
print(', '.join(f"{'x'.join(map(str, s))}: {len(p)}" for s, p in table), flush=True)
built = compile_many([src for _, ps in table for _, _, src in ps.values()])  # in parallel; evaluate finds them cached
print(sum(not b.ok for b in built), 'of', len(built), 'failed to build', flush=True)
for rep in range(2):
    for shape, ps in table:
        names = list(ps)
        for mode in ('server', 'back-to-back'):
            if time.monotonic() > deadline:
                break
            r = evaluate(ps[names[0]][2], shape, mode=mode, rivals={n: ps[n][2] for n in names[1:]})
            row = {'shape': list(shape), 'mode': mode, 'rep': rep, 'status': r.status, 'candidate': names[0],
                   'params': {n: [ps[n][0], ps[n][1]] for n in names},
                   'gpu': r.gpu.get('gpu_uuid') if r.gpu else None}
            if r.ok:
                h = r.head_to_head(BEST_NVIDIA)
                row['vs_best'] = {n: h.get('candidate' if n == names[0] else n) for n in names}
                row['median_us'] = {n: (r.candidate if n == names[0] else r.rivals[n]).median_us for n in names}
                row['best_nvidia_us'] = min(b.median_us for b in r.baselines.values())
                print('x'.join(map(str, shape)), mode, rep, ' '.join(f'{n} {v:.3f}' for n, v in row['vs_best'].items()),
                      flush=True)
            else:
                row['reason'] = r.reason[:300]
                print('x'.join(map(str, shape)), mode, r.status, r.reason[:200], flush=True)
            rows.append(row)
            out.write_text(json.dumps(rows, indent=1))
out.write_text(json.dumps(rows, indent=1))
