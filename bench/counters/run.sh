#!/bin/bash
# run.sh ROUNDS OUT : interleaves the variants and kinds, writes variant,kind,stmt,ms rows.
export PGHOST=127.0.0.1 PGUSER=postgres
R=$1; OUT=$2; : > $OUT
A=aaaaaaaa-0000-0000-0000-000000000000; T=bbbbbbbb-0000-0000-0000-000000000000
names=(claim gset renew settle reset)
for r in $(seq 1 $R); do
  for v in none old v2; do
    ./variant.sh $v
    for k in a t; do
      acct=$A; [ $k = t ] && acct=$T
      i=0
      pgbench -n -r -M extended -t 40 -D acct=$acct -f cycle.sql "${PGDATABASE:-counters_bench}" 2>/dev/null | grep -A5 'statement latencies' | tail -5 | while read ms f rest; do
        echo "$r,$v,$k,${names[$i]},$ms" >> $OUT; i=$((i+1)); done
      i=0
      pgbench -n -r -t 3 -f expand_$k.sql "${PGDATABASE:-counters_bench}" 2>/dev/null | grep -A2 'statement latencies' | tail -2 | while read ms f rest; do
        n=insert5000; [ $i = 1 ] && n=delete5000
        echo "$r,$v,$k,$n,$ms" >> $OUT; i=$((i+1)); done
    done
  done
done
