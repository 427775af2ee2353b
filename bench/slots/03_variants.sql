-- C. Cheaper layouts of the same EAV rows, for comparison with A:
--  C1 contact_attributes_p: contact_attributes partitioned by LIST (slug), with the
--     same primary key and typed partial indexes. Only the three partitions the bench's
--     conditions read are filled (plan, score, renewal: 3M rows, copied in heap order);
--     a slug-pruned query reads exactly these, each a heap of 1M rows whose visibility
--     map is one page.
--  C2 contact_attributes_by_contact_idx: (account_id, slug, contact_id) INCLUDE (the
--     value columns) on the unpartitioned table, so each condition's set is read in
--     contact order (filtering on the included value) and the sets meet in merge joins.
\set ON_ERROR_STOP on
SET maintenance_work_mem = '512MB';
SET synchronous_commit = off;
DROP TABLE IF EXISTS contact_attributes_p;
CREATE TABLE contact_attributes_p (
    account_id    uuid             NOT NULL,
    contact_id    uuid             NOT NULL,
    slug          text             NOT NULL,
    string_value  text,
    number_value  double precision,
    bool_value    boolean,
    date_value    timestamptz,
    PRIMARY KEY (account_id, contact_id, slug)
) PARTITION BY LIST (slug);
CREATE TABLE contact_attributes_p_plan PARTITION OF contact_attributes_p FOR VALUES IN ('plan');
CREATE TABLE contact_attributes_p_score PARTITION OF contact_attributes_p FOR VALUES IN ('score');
CREATE TABLE contact_attributes_p_renewal PARTITION OF contact_attributes_p FOR VALUES IN ('renewal');
CREATE TABLE contact_attributes_p_default PARTITION OF contact_attributes_p DEFAULT;
INSERT INTO contact_attributes_p
SELECT * FROM contact_attributes WHERE slug IN ('plan', 'score', 'renewal');
CREATE INDEX ON contact_attributes_p (account_id, slug, lower(string_value), contact_id)
    INCLUDE (string_value) WHERE string_value IS NOT NULL;
CREATE INDEX ON contact_attributes_p (account_id, slug, number_value, contact_id) WHERE number_value IS NOT NULL;
CREATE INDEX ON contact_attributes_p (account_id, slug, bool_value, contact_id) WHERE bool_value IS NOT NULL;
CREATE INDEX ON contact_attributes_p (account_id, slug, date_value, contact_id) WHERE date_value IS NOT NULL;
VACUUM (ANALYZE) contact_attributes_p;

DROP INDEX IF EXISTS contact_attributes_by_contact_idx;
CREATE INDEX contact_attributes_by_contact_idx ON contact_attributes (account_id, slug, contact_id)
    INCLUDE (string_value, number_value, date_value, bool_value);
VACUUM (ANALYZE) contact_attributes;
SELECT relname, pg_size_pretty(pg_relation_size(oid)) AS size
FROM pg_class WHERE (relname LIKE 'contact_attributes_p%' OR relname = 'contact_attributes_by_contact_idx')
  AND pg_relation_size(oid) > 8192 ORDER BY 1;
