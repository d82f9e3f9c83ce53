"""What server mode leaves to win, from a campaign's final times (no GPU; run from the repository root):
`python3 docs/benchmarks/data/sweeps/server_headroom_2026-11-29.py FINAL_TIMES_JSON [OUT_JSON]`.

For each shape, each mode's winner and best NVIDIA (the fastest baseline median of an evaluation), the evaluation
whose ratio is the median of its mode's three. A call's cold cost is its server time less its separated time; the
extra cold cost is ours less best NVIDIA's. Were it zero, the server ratio would be best NVIDIA's server time over
(that time less the separated gap), the "ceiling" below. Separated mode credits a programmatic-dependent-launch
kernel with its launch overlapped by the kernel before it (~0.9 us on the H200), which server mode, with no kernel
before the call, cannot; so the ceiling holds that credit too."""
import collections, json, statistics, sys

BIG = 2 ** 36
rows = json.load(open(sys.argv[1]))['results']
by = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    by[tuple(r['shape'])][r['mode']].append((r['candidate_median_us'], min(r['baselines_median_us'].values())))


def median_eval(evals):
    evals = sorted(evals, key=lambda e: e[1] / e[0])
    return evals[len(evals) // 2]


out = []
for shape, modes in sorted(by.items(), key=lambda kv: kv[0][0] * kv[0][1] * kv[0][2]):
    if 'server' not in modes or 'separated' not in modes:
        continue
    (ks, ns), (kp, np_) = median_eval(modes['server']), median_eval(modes['separated'])
    out.append({'shape': list(shape), 'big': 2 * shape[0] * shape[1] * shape[2] >= BIG, 'server': round(ns / ks, 4),
                'ceiling': round(ns / (ns - (np_ - kp)), 4), 'extra_cold_us': round((ks - kp) - (ns - np_), 2),
                'us': {'server': [ks, ns], 'separated': [kp, np_]}})
    print('x'.join(map(str, shape)), 'server %.3f ceiling %.3f extra cold cost %+.2f us' % (
        out[-1]['server'], out[-1]['ceiling'], out[-1]['extra_cold_us']))
g = statistics.geometric_mean
small = [o['extra_cold_us'] for o in out if not o['big']]
summary = {'shapes': len(out), 'server_geomean': round(g([o['server'] for o in out]), 4),
           'ceiling_geomean': round(g([o['ceiling'] for o in out]), 4),
           'extra_cold_us_below_2^36': {'median': round(statistics.median(small), 2), 'min': min(small),
                                        'max': max(small), 'shapes': len(small)}}
print(json.dumps(summary))
if len(sys.argv) > 2:
    json.dump({'what': __doc__.strip(), 'source': sys.argv[1], 'summary': summary, 'shapes': out},
              open(sys.argv[2], 'w'), indent=1)
