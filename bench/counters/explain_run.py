"""explain_run.py ROUNDS CYCLES OUT VARIANTS: per round, per variant, per kind, one psql
session runs CYCLES claim/renew/settle/reset cycles (and one expansion insert+delete of
5,000) under EXPLAIN (ANALYZE, FORMAT JSON), and records each statement's execution time
and the time of the counting trigger(s). Rows: round,variant,kind,stmt,rows,exec_ms,trigger_ms."""
import json, os, subprocess, sys
R, C, OUT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
VARIANTS = sys.argv[4].split(',')
A = 'aaaaaaaa-0000-0000-0000-000000000000'; T = 'bbbbbbbb-0000-0000-0000-000000000000'
TOK = '11111111-1111-1111-1111-111111111111'
E = 'EXPLAIN (ANALYZE, FORMAT JSON) '
def script(acct, kind, ann):
    out = []
    for c in range(C):
        out.append("\\echo TAG claim")
        out.append(E + f"UPDATE messages AS claimed SET locked_until = now() + interval '5 min', lease_token = '{TOK}', status = 'sending', claims_without_outcome = claimed.claims_without_outcome + 1 FROM (SELECT account_id, id, status AS claimed_from FROM messages WHERE account_id = '{acct}' AND status IN ('queued', 'sending') AND next_attempt_at <= now() AND (locked_until IS NULL OR locked_until <= now()) ORDER BY next_attempt_at LIMIT 128 FOR UPDATE SKIP LOCKED) AS due WHERE claimed.account_id = '{acct}' AND claimed.account_id = due.account_id AND claimed.id = due.id RETURNING claimed.*, due.claimed_from;")
        out.append(f"SELECT array_agg(id)::text AS ids FROM messages WHERE account_id = '{acct}' AND lease_token = '{TOK}' \\gset")
        out.append("\\echo TAG renew")
        out.append(E + f"UPDATE messages AS held SET locked_until = now() + interval '10 min' FROM (SELECT account_id, id FROM messages WHERE account_id = '{acct}' AND lease_token = '{TOK}' AND id = ANY(:'ids'::uuid[]) AND status = 'sending' ORDER BY account_id, id FOR UPDATE SKIP LOCKED) AS mine WHERE held.account_id = '{acct}' AND held.account_id = mine.account_id AND held.id = mine.id;")
        out.append("\\echo TAG settle")
        out.append(E + f"UPDATE messages AS m SET status = 'sent', skip_reason = NULL, attempts = m.attempts + 1, next_attempt_at = NULL, last_reply = '250 ok', updated_at = now(), sent_at = now(), locked_until = NULL, lease_token = NULL, claims_without_outcome = 0 FROM unnest(:'ids'::uuid[]) AS v(id) WHERE m.account_id = '{acct}' AND m.id = v.id AND m.lease_token = '{TOK}' RETURNING m.id;")
        out.append("\\echo TAG reset")
        out.append(E + f"UPDATE messages SET status = 'queued', sent_at = NULL, next_attempt_at = now() - interval '1 day' + random() * interval '1 hour' WHERE account_id = '{acct}' AND id = ANY(:'ids'::uuid[]);")
    for _ in range(2):
        out.append("\\echo TAG insert5000")
        out.append(E + f"INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status, data, attempts, next_attempt_at, message_id_header, created_at, updated_at, announcement_id) SELECT c.account_id, gen_random_uuid(), c.id, c.email, '22222222-2222-2222-2222-222222222222', '{kind}', 'queued', '{{}}', 0, now(), '<x@y>', '2000-01-01', now(), {ann} FROM contacts c WHERE c.account_id = '{acct}' ORDER BY c.id LIMIT 5000;")
        out.append("\\echo TAG delete5000")
        out.append(E + f"DELETE FROM messages WHERE account_id = '{acct}' AND created_at = '2000-01-01';")
    return '\n'.join(out) + '\n'
with open(OUT, 'a') as f:
    for r in range(1, R + 1):
        for v in VARIANTS:
            subprocess.run(['./variant.sh', v], check=True)
            for k, acct, kind, ann in [('a', A, 'announcement', "'aaaaaaaa-0000-0000-0000-00000000000b'"), ('t', T, 'transactional', 'NULL')]:
                p = subprocess.run(['psql', '-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-d', os.environ.get('PGDATABASE', 'counters_bench')],
                                   input=script(acct, kind, ann), capture_output=True, text=True,
                                   env=dict(os.environ, PGHOST=os.environ.get('PGHOST', '127.0.0.1'), PGUSER=os.environ.get('PGUSER', 'postgres')))
                if p.returncode:
                    sys.exit(p.stderr)
                lines = p.stdout.split('\n')
                tag, buf = None, []
                def flush():
                    if tag and buf:
                        plan = json.loads('\n'.join(buf))[0]
                        trig = sum(t['Time'] for t in plan.get('Triggers', []) if 'count' in t['Trigger Name'])
                        rows = plan['Plan'].get('Actual Rows', 0)
                        f.write(f"{r},{v},{k},{tag},{rows},{plan['Execution Time']:.3f},{trig:.3f}\n")
                for line in lines:
                    if line.startswith('TAG '):
                        flush(); tag, buf = line[4:], []
                    elif tag:
                        buf.append(line)
                flush()
