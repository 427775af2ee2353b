import csv, sys, statistics
from collections import defaultdict
d = defaultdict(list)
for r, v, k, s, ms in csv.reader(open(sys.argv[1])):
    d[(k, s, v)].append(float(ms))
variants = sys.argv[2].split(',') if len(sys.argv) > 2 else ['none', 'old', 'v2']
stmts = ['claim', 'renew', 'settle', 'reset', 'insert5000', 'delete5000']
for k in ['a', 't']:
    print('kind', k)
    for s in stmts:
        row = [s]
        for v in variants:
            xs = d.get((k, s, v), [])
            row.append('%s=%.2f(n%d)' % (v, statistics.median(xs), len(xs)) if xs else v + '=-')
        print('  ' + ' '.join(row))
