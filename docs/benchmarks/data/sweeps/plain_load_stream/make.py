"""Players for the stream probe: python3 docs/benchmarks/data/sweeps/plain_load_stream/make.py OUT.json SHAPE... (MxNxK)"""
import itertools, json, random, sys
from pathlib import Path
sys.path.insert(0, '.')
from agent.policy import BuiltinPolicy

TM = Path(__file__).with_name('kernel.cu.tmpl').read_text()


def render(mt, nt, d, wn, wk, ck, ap):
    s = TM
    for k, v in dict(MT=mt, NT=nt, D=d, WN=wn, WK=wk, CK=ck, AP=ap).items():
        s = s.replace(f'@{k}@', str(v))
    return s


def configs(m, n, k, count=10):
    mt = -(-m // 16)
    out = []
    for nt, d, wn, wk, ck, ap in itertools.product((1, 2, 4), (2, 4, 8), (2, 4), (1, 2, 4), (1, 2, 4, 8), (0, 1)):
        if nt * d > 16 or (ap and mt > 2) or wn * wk > 8:
            continue
        cols = 8 * nt * wn
        ctas = -(-n // cols) * ck
        warps = ctas * wn * wk
        chunks = -(-k // 32) / (ck * wk)
        smem = wk * 16 * mt * (cols + 4) * 4
        if ctas < 64 or ctas > 132 * 8 or not 132 * 4 <= warps <= 132 * 48 or chunks < 2 * d or smem > 160 * 1024:
            continue
        if 16 * mt % ck:
            continue
        out.append((mt, nt, d, wn, wk, ck, ap))
    random.Random(f'{m}x{n}x{k}').shuffle(out)
    # spread over (nt, d): one of each first
    seen, pick = set(), []
    for c in out:
        if (c[1], c[2]) not in seen:
            seen.add((c[1], c[2])); pick.append(c)
    for c in out:
        if len(pick) >= count:
            break
        if c not in pick:
            pick.append(c)
    return pick[:count]


players = {}
for s in sys.argv[2:]:
    shape = tuple(int(x) for x in s.split('x'))
    ps = {}
    fams = set()
    for i, c in enumerate(BuiltinPolicy(0).propose(shape, 'fp32', 'sm_90a', [], n=4)):
        if c.family not in fams:
            fams.add(c.family)
            ps[f'first{i}_{c.family}'] = {'source': c.source, 'params': c.params}
    for c in configs(*shape):
        ps['st_mt%d_nt%d_d%d_wn%d_wk%d_ck%d_ap%d' % c] = {'source': render(*c), 'params': dict(zip('mt nt d wn wk ck ap'.split(), c))}
    players[s] = ps
    print(s, len(ps), list(ps)[:3], [p for p in ps if p.startswith('first')])
Path(sys.argv[1]).write_text(json.dumps(players))
