"""Medians of explain_run.py output: per kind and statement, for each variant, the
statement's execution time and the counting triggers' time (ms), and the per-row trigger
cost in µs (128 rows for claim/renew/settle/reset, 5,000 for insert/delete)."""
import csv, sys, statistics
from collections import defaultdict
ex, tr = defaultdict(list), defaultdict(list)
for r, v, k, s, rows, e, t in csv.reader(open(sys.argv[1])):
    ex[(k, s, v)].append(float(e)); tr[(k, s, v)].append(float(t))
variants = sys.argv[2].split(',')
n = {'claim': 128, 'renew': 128, 'settle': 128, 'reset': 128, 'insert5000': 5000, 'delete5000': 5000}
for k in ['a', 't']:
    print('kind', {'a': 'announcement', 't': 'transactional'}[k])
    for s in n:
        cells = []
        for v in variants:
            if (k, s, v) not in ex: continue
            m_e = statistics.median(ex[(k, s, v)]); m_t = statistics.median(tr[(k, s, v)])
            cells.append(f"{v}: exec {m_e:.2f} trig {m_t:.3f} ({1000*m_t/n[s]:.1f}us/row) n={len(ex[(k,s,v)])}")
        print(f"  {s:11s} " + ' | '.join(cells))
