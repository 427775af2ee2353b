-- Sends on the wire per account and UTC month, with the account's owner: the message to
-- the contact and each Cc or Bcc copy the server took count one each. The monthly send
-- limit (MAILROOM_MONTHLY_SEND_LIMIT) reads an owner's total over every account it owns,
-- so making more accounts does not multiply a user's allowance.
--
-- Keyed by the owner first: on Citus this table stays on the coordinator (a local table,
-- crates/postgres/src/citus.rs), so the claim reads one owner's total in one statement on
-- one node, where a sum over the owner's accounts' own rows would read every shard. One
-- row per account, so an owner's accounts recording outcomes at once do not wait on one
-- row. No foreign key: Citus refuses one from a local table to a distributed one, and an
-- account's owner never changes (docs/api-decisions.md, "Team members").
CREATE TABLE monthly_sends (
    owner_id   uuid   NOT NULL,
    month      date   NOT NULL CHECK (extract(day FROM month) = 1),
    account_id uuid   NOT NULL,
    sends      bigint NOT NULL CHECK (sends >= 0),
    PRIMARY KEY (owner_id, month, account_id)
);

-- The month under way so far, from the daily `sent` counters (messages only: copies were
-- not counted before this table).
INSERT INTO monthly_sends (owner_id, month, account_id, sends)
SELECT m.user_id, date_trunc('month', s.day)::date, s.account_id, sum(s.sent)
FROM message_stats_daily s
JOIN memberships m ON m.account_id = s.account_id AND m.role = 'owner'
WHERE s.day >= date_trunc('month', now() AT TIME ZONE 'UTC')::date AND s.sent > 0
GROUP BY 1, 2, 3;
