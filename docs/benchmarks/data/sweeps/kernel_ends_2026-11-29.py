"""One-off probes behind docs/benchmarks/data/kernel_ends_*_h200_2026-11-29_*.json (run from the repository root on a
GPU machine; OUT, DEADLINE_S, EXP). Each kernel as the tree renders it ("new") is timed beside its twin with the
old end ("old", made by substitution) in the same rounds. EXP=cluster_end (the default): the split kernels that
sum their K-slices over a thread-block cluster (`small` and `hopper_raw` with cluster_k > 1) end with a cluster
barrier, so that no CTA leaves while another still reads its shared memory. With release semantics that barrier
first waits for the thread's stores of C to be acknowledged (Nsight Compute: `membar` the top stall of
64x128x1024's winner); a relaxed arrive does not. Each shape's first cluster-split prior of each family, server and
back to back, against best NVIDIA; two of them run once under compute-sanitizer (memcheck, racecheck) first. EXP=tma_store_end:
hopper_raw's TMA epilogue ends on `cp.async.bulk.wait_group.read 0` (its stores have read shared memory) instead of
`cp.async.bulk.wait_group 0` (their writes have landed too), each shape's first TMA-epilogue prior in server mode's
list, the same way (one of them sanitized). EXP=publish_relaxed: what the cluster splits' publishing barrier (release
and acquire, a MEMBAR.ALL.GPU) costs at most: its twin ("old" in the rows) has a relaxed one, which does not order
the partial tiles' writes before peers read them, so the twin's sums may be wrong; it is timed, never checked or
kept, to bound what an ordering without the membar could gain. EXP=publish_push: the tree's cluster splits, which
push each partial row to the CTA that sums it (st.async, counted on that CTA's barrier) after a relaxed barrier,
against the same params rendered by an older tree (OLD_TREE, a directory holding its agent/: the release/acquire
publishing barrier and a relaxed end) and that source with a relaxed publishing barrier ("bound", timed only); the
new kernels are the checked candidates, ragged shapes included, two of them sanitized first. EXP=push_width: every
tile pushes (PUSH_MAX_TILE raised in each tree): the tree's pushes (the checked candidate; at 9f8e3f4, where this
ran, 16-byte pushes, lanes swapping a pair) against V2_TREE's 8-byte pushes ("v2") and OLD_TREE's publishing
barrier ("old"), on small and large tiles of both families. EXP=same_pushes: a template change that should not change
what the pushing splits do: each shape's first pushing prior of each family as the tree renders it against OLD_TREE's
render of the same params ("old", nothing forced), once; the first of each family sanitized first."""
import json, os, subprocess, sys, time
sys.path.insert(0, '.')
from pathlib import Path
from agent.families import get
from evaluator.api import evaluate
from evaluator.record import BEST_NVIDIA

RELAXED = 'barrier.cluster.arrive.relaxed.aligned;\\nbarrier.cluster.wait.aligned;'
RELEASE = 'barrier.cluster.arrive.release.aligned;\\nbarrier.cluster.wait.acquire.aligned;'
EXP = os.environ.get('EXP', 'cluster_end')
STORE_READ, STORE_DONE = 'cp.async.bulk.wait_group.read 0;', 'cp.async.bulk.wait_group 0;'
SHAPES = [(64, 128, 1024), (64, 2048, 4096), (64, 512, 2048), (64, 64, 4096), (64, 1024, 8192), (128, 128, 4096),
          (256, 2048, 16384), (128, 4096, 12288), (256, 64, 8192), (64, 4096, 2048)]
if EXP == 'tma_store_end':
    SHAPES = [(128, 16384, 64), (1024, 2048, 64), (1024, 12288, 256), (16384, 64, 256), (512, 1024, 512),
              (1024, 1024, 1024), (2048, 512, 2048), (256, 4096, 1024), (2048, 2048, 1024), (4096, 4096, 2048),
              (1024, 4096, 8192)]
if EXP == 'publish_push':
    SHAPES = SHAPES + [(48, 2000, 4096), (40, 120, 1024), (200, 64, 8192)]
if EXP == 'same_pushes':
    SHAPES = [(64, 128, 1024), (64, 512, 2048), (64, 64, 4096), (40, 120, 1024), (48, 2000, 4096), (100, 90, 4104)]
if EXP == 'push_width':
    SHAPES = [(256, 2048, 16384), (128, 4096, 12288), (64, 4096, 2048), (64, 128, 1024), (48, 2000, 4096),
              (40, 120, 1024)]
OLD_RENDER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from agent.families import get, small, hopper_raw
if sys.argv[2:] != ['as-is']:
    small.PUSH_MAX_TILE = hopper_raw.PUSH_MAX_TILE = 1 << 30  # every split pushes (trees that know pushes)
json.dump([get(f).render(p) for f, p in json.load(sys.stdin)], sys.stdout)
"""
out = Path(os.environ.get('OUT', '/tmp')) / f'{EXP}.json'
deadline = time.monotonic() + float(os.environ.get('DEADLINE_S', '420'))


def release_twin(src: str) -> str:
    twin = src.replace(RELAXED, RELEASE)
    assert twin != src, 'no relaxed cluster arrive in the source'
    return twin


def render_in(tree: str, found: list, *flags: str) -> list[str]:
    """Each (shape, family, params) of `found` rendered by the agent/ under `tree` (OLD_RENDER: every split pushes
    unless the flag 'as-is' is given)."""
    return json.loads(subprocess.run([sys.executable, '-c', OLD_RENDER, tree, *flags], check=True, text=True,
                                     input=json.dumps([[f, p] for _, f, p in found]), capture_output=True).stdout)


def publish_relaxed_twin(src: str) -> str:
    for old, new in (('cluster_sync();  // every partial tile', 'cluster_hold();  // every partial tile'),
                     ('cluster.sync();  // all partial tiles', 'asm volatile("' + RELAXED + '" ::: "memory");  // all')):
        if old in src:
            return src.replace(old, new)
    raise AssertionError('no publishing cluster barrier in the source')


def store_done_twin(src: str) -> str:
    assert STORE_READ in src, 'no .read wait at the end of the TMA epilogue'
    return src.replace(STORE_READ, STORE_DONE)


def players():
    if EXP == 'tma_store_end':
        for shape in SHAPES:
            ps = [p for p in get('hopper_raw').priors(shape, 'fp32', mode='server') if p.get('epi') == 'tma']
            if ps:
                src = get('hopper_raw').render(ps[0])
                yield shape, 'hopper_raw', ps[0], src, store_done_twin(src)
        return
    if EXP == 'push_width':
        from agent.families import small, hopper_raw
        small.PUSH_MAX_TILE = hopper_raw.PUSH_MAX_TILE = 1 << 30
        found = [(shape, fam, p) for shape in SHAPES for fam in ('small', 'hopper_raw')
                 for p in [q for q in get(fam).priors(shape, 'fp32') if q.get('cluster_k', 1) > 1][:1]]
        found = [f for f in found if f[0][0] != 48 or f[1] == 'small']
        found = [f for f in found if f[0][0] != 40 or f[1] == 'hopper_raw']
        olds, v2s = render_in(os.environ['OLD_TREE'], found), render_in(os.environ['V2_TREE'], found)
        for (shape, fam, p), old, v2 in zip(found, olds, v2s):
            yield shape, fam, p, get(fam).render(p), {'old': old, 'v2': v2}
        return
    if EXP == 'same_pushes':
        found = [(shape, fam, p) for shape in SHAPES for fam in ('small', 'hopper_raw')
                 for p in [q for q in get(fam).priors(shape, 'fp32') if get(fam).pushes(q)][:1]]
        for (shape, fam, p), old in zip(found, render_in(os.environ['OLD_TREE'], found, 'as-is')):
            yield shape, fam, p, get(fam).render(p), {'old': old}
        return
    if EXP == 'publish_push':
        found = [(shape, fam, p) for shape in SHAPES for fam in ('small', 'hopper_raw')
                 for p in [q for q in get(fam).priors(shape, 'fp32') if q.get('cluster_k', 1) > 1][:1]]
        for (shape, fam, p), old in zip(found, render_in(os.environ['OLD_TREE'], found)):
            yield shape, fam, p, get(fam).render(p), {'old': old, 'bound': publish_relaxed_twin(old)}
        return
    for shape in SHAPES:
        for fam in ('small', 'hopper_raw'):
            f = get(fam)
            ps = [p for p in f.priors(shape, 'fp32') if p.get('cluster_k', 1) > 1]
            if ps:
                src = f.render(ps[0])
                twin = publish_relaxed_twin(src) if EXP == 'publish_relaxed' else release_twin(src)
                yield shape, fam, ps[0], src, twin


rows = []
plist = list(players())
print(len(plist), 'players', flush=True)
raw = [x for x in plist if x[1] == 'hopper_raw']
sanitized = [] if EXP == 'publish_relaxed' else (
    plist[:1] + (raw[:1] if EXP in ('cluster_end', 'publish_push', 'same_pushes') else []))
if EXP == 'push_width':
    sanitized = [x for x in plist if x[0] == (64, 128, 1024)]
for shape, fam, p, src, _ in sanitized:
    r = evaluate(src, shape, mode='back-to-back', sanitize=True)
    rows.append({'shape': list(shape), 'family': fam, 'params': p, 'sanitize': r.status, 'reason': r.reason[:300]})
    print('sanitize', shape, fam, r.status, r.reason[:200], flush=True)
for rep in range(1 if EXP in ('push_width', 'same_pushes') else 2):
    for shape, fam, p, src, twin in plist:
        for mode in ('server', 'back-to-back'):
            if time.monotonic() > deadline:
                break
            r = evaluate(src, shape, mode=mode, rivals=twin if isinstance(twin, dict) else {'old': twin})
            row = {'shape': list(shape), 'family': fam, 'params': p, 'mode': mode, 'rep': rep, 'status': r.status,
                   'gpu': r.gpu.get('gpu_uuid') if r.gpu else None}
            if r.ok:
                h = r.head_to_head(BEST_NVIDIA)
                row.update(new_vs_best=h.get('candidate'), old_vs_best=h.get('old'),
                           new_us=r.candidate.median_us, old_us=r.rivals['old'].median_us,
                           best_nvidia_us=min(b.median_us for b in r.baselines.values()))
                for extra in ('bound', 'v2'):
                    if extra in r.rivals:
                        row.update({f'{extra}_vs_best': h.get(extra), f'{extra}_us': r.rivals[extra].median_us})
                print('x'.join(map(str, shape)), fam, mode, rep, 'new %.3f old %.3f (%.2f / %.2f us)' % (
                    row['new_vs_best'], row['old_vs_best'], row['new_us'], row['old_us']), flush=True)
            else:
                row['reason'] = r.reason[:300]
                print('x'.join(map(str, shape)), fam, mode, r.status, r.reason[:200], flush=True)
            rows.append(row)
            out.write_text(json.dumps(rows, indent=1))
out.write_text(json.dumps(rows, indent=1))
