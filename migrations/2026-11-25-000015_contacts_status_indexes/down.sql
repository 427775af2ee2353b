DROP INDEX IF EXISTS contacts_bounced_idx;
DROP INDEX IF EXISTS contacts_status_rank_idx;
