-- Typed slots: a per-contact row with one typed column per attribute, for segment counts
-- that read one table at the pace of a flat table (docs/operations.md, "What lists and counts read").
--
-- `contact_attributes` stays the truth and serves every read of values. The first four
-- custom attributes of each type in an account (in the order their metas were created)
-- get a slot: a column of `contact_slots` that holds the same value for every
-- contact (a string lowered, as every string condition compares it), NULL exactly when the contact has no value for that slug. A contact has a row
-- once it has a value in any slot (a contact without one has no row, so a count of
-- `not_exists` does not read this table). Triggers keep the two in step whatever writes
-- the attributes (the API, the import, an event, SQL by hand):
--
-- - a new meta takes the lowest free slot of its type (`attribute_metas_take_slot`) and
--   copies any rows its slug already has (`attribute_metas_fill_slot`);
-- - every insert or update of attribute rows copies the slotted values into their
--   contacts' rows, inserting a row where there is none (`contact_slots_copy`, one
--   statement per statement, from the transition table);
-- - a deleted contact's row goes with it (foreign key). Attribute rows are never deleted
--   alone, and slots are never reassigned: the API neither deletes an attribute nor
--   changes its type.
--
-- `event.*` dates get no slot: an event moves its date forward on every event, the
-- hottest write of the audience, and a slot would turn each into a new slot row version
-- with an entry in every filled slot index (docs/operations.md, "What lists and counts read").
--
-- Writers of the audience wait while this migration runs: the copy below reads every
-- attribute row once (32 s for a million contacts with eight attributes each, see
-- docs/operations.md).
LOCK TABLE attribute_metas, contacts, contact_attributes IN SHARE ROW EXCLUSIVE MODE;

ALTER TABLE attribute_metas ADD COLUMN slot smallint CHECK (slot BETWEEN 1 AND 4),
    ADD CONSTRAINT attribute_metas_slot_custom CHECK (slot IS NULL OR source = 'custom');
CREATE UNIQUE INDEX attribute_metas_slot_key
    ON attribute_metas (account_id, attribute_type, slot) WHERE slot IS NOT NULL;

UPDATE attribute_metas m SET slot = ranked.n
FROM (SELECT account_id, slug,
             row_number() OVER (PARTITION BY account_id, attribute_type ORDER BY created_at, slug) AS n
      FROM attribute_metas WHERE source = 'custom') ranked
WHERE ranked.account_id = m.account_id AND ranked.slug = m.slug AND ranked.n <= 4;

CREATE TABLE contact_slots (
    account_id  uuid NOT NULL,
    contact_id  uuid NOT NULL,
    string_1    text,
    string_2    text,
    string_3    text,
    string_4    text,
    number_1    double precision,
    number_2    double precision,
    number_3    double precision,
    number_4    double precision,
    boolean_1   boolean,
    boolean_2   boolean,
    boolean_3   boolean,
    boolean_4   boolean,
    date_1      timestamptz,
    date_2      timestamptz,
    date_3      timestamptz,
    date_4      timestamptz,
    PRIMARY KEY (account_id, contact_id),
    FOREIGN KEY (account_id, contact_id) REFERENCES contacts (account_id, id) ON DELETE CASCADE
);

-- The row of every contact with a value in a slot.
INSERT INTO contact_slots (account_id, contact_id, string_1, string_2, string_3, string_4, number_1, number_2, number_3, number_4, boolean_1, boolean_2, boolean_3, boolean_4, date_1, date_2, date_3, date_4)
SELECT a.account_id, a.contact_id,
       max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 1),
       max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 2),
       max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 3),
       max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 4),
       max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 1),
       max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 2),
       max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 3),
       max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 4),
       bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 1),
       bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 2),
       bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 3),
       bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 4),
       max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 1),
       max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 2),
       max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 3),
       max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 4)
FROM contact_attributes a
JOIN attribute_metas m ON m.account_id = a.account_id AND m.slug = a.slug AND m.slot IS NOT NULL
GROUP BY a.account_id, a.contact_id;

-- One partial index per slot: a contact without the attribute has no entry. A string slot
-- holds the value lowered (every string condition compares lowered), so its index is on
-- the plain column: PostgreSQL answers a count from such an index alone (an index-only
-- scan), which it does not from an expression index, and keeps the column's statistics.
CREATE INDEX contact_slots_string_1_idx ON contact_slots (account_id, string_1) WHERE string_1 IS NOT NULL;
CREATE INDEX contact_slots_string_2_idx ON contact_slots (account_id, string_2) WHERE string_2 IS NOT NULL;
CREATE INDEX contact_slots_string_3_idx ON contact_slots (account_id, string_3) WHERE string_3 IS NOT NULL;
CREATE INDEX contact_slots_string_4_idx ON contact_slots (account_id, string_4) WHERE string_4 IS NOT NULL;
CREATE INDEX contact_slots_number_1_idx ON contact_slots (account_id, number_1) WHERE number_1 IS NOT NULL;
CREATE INDEX contact_slots_number_2_idx ON contact_slots (account_id, number_2) WHERE number_2 IS NOT NULL;
CREATE INDEX contact_slots_number_3_idx ON contact_slots (account_id, number_3) WHERE number_3 IS NOT NULL;
CREATE INDEX contact_slots_number_4_idx ON contact_slots (account_id, number_4) WHERE number_4 IS NOT NULL;
CREATE INDEX contact_slots_boolean_1_idx ON contact_slots (account_id, boolean_1) WHERE boolean_1 IS NOT NULL;
CREATE INDEX contact_slots_boolean_2_idx ON contact_slots (account_id, boolean_2) WHERE boolean_2 IS NOT NULL;
CREATE INDEX contact_slots_boolean_3_idx ON contact_slots (account_id, boolean_3) WHERE boolean_3 IS NOT NULL;
CREATE INDEX contact_slots_boolean_4_idx ON contact_slots (account_id, boolean_4) WHERE boolean_4 IS NOT NULL;
CREATE INDEX contact_slots_date_1_idx ON contact_slots (account_id, date_1) WHERE date_1 IS NOT NULL;
CREATE INDEX contact_slots_date_2_idx ON contact_slots (account_id, date_2) WHERE date_2 IS NOT NULL;
CREATE INDEX contact_slots_date_3_idx ON contact_slots (account_id, date_3) WHERE date_3 IS NOT NULL;
CREATE INDEX contact_slots_date_4_idx ON contact_slots (account_id, date_4) WHERE date_4 IS NOT NULL;


-- A new custom attribute's meta takes the lowest free slot of its type. The advisory
-- lock orders the metas created at once for one account; a meta that exists already (the
-- insert will do nothing) takes no lock, so the steady state of `ensure_attribute_metas`
-- costs a probe.
CREATE FUNCTION attribute_metas_take_slot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.slot IS NOT NULL OR NEW.source <> 'custom' OR EXISTS (
        SELECT 1 FROM attribute_metas WHERE account_id = NEW.account_id AND slug = NEW.slug
    ) THEN
        RETURN NEW;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('attribute slots ' || NEW.account_id::text, 0));
    SELECT min(candidate) INTO NEW.slot
    FROM generate_series(1, 4) AS candidate
    WHERE NOT EXISTS (
        SELECT 1 FROM attribute_metas m
        WHERE m.account_id = NEW.account_id AND m.attribute_type = NEW.attribute_type
          AND m.slot = candidate
    );
    RETURN NEW;
END $$;
CREATE TRIGGER attribute_metas_take_slot
    BEFORE INSERT ON attribute_metas
    FOR EACH ROW EXECUTE FUNCTION attribute_metas_take_slot();

-- Rows written before their meta (no code path does, but SQL by hand may) are copied when
-- the meta takes its slot.
CREATE FUNCTION attribute_metas_fill_slot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format(
        'INSERT INTO contact_slots AS s (account_id, contact_id, %1$I) '
        'SELECT a.account_id, a.contact_id, %3$s FROM contact_attributes a '
        'WHERE a.account_id = $1 AND a.slug = $2 AND a.%2$I IS NOT NULL '
        'ON CONFLICT (account_id, contact_id) DO UPDATE SET %1$I = excluded.%1$I',
        NEW.attribute_type || '_' || NEW.slot,
        CASE NEW.attribute_type WHEN 'boolean' THEN 'bool_value' ELSE NEW.attribute_type || '_value' END,
        CASE NEW.attribute_type WHEN 'string' THEN 'lower(a.string_value)'
             WHEN 'boolean' THEN 'a.bool_value' ELSE 'a.' || NEW.attribute_type || '_value' END
    ) USING NEW.account_id, NEW.slug;
    RETURN NULL;
END $$;
CREATE TRIGGER attribute_metas_fill_slot
    AFTER INSERT ON attribute_metas
    FOR EACH ROW WHEN (NEW.slot IS NOT NULL) EXECUTE FUNCTION attribute_metas_fill_slot();

-- The slotted values a statement wrote, copied into their contacts' rows: one pivot per
-- contact (a statement writes a (contact, slug) at most once), inserted as the contact's
-- row or merged into it. A slot the statement did not write is NULL in the pivot and keeps
-- its value: a written value is never NULL (one typed column of a row is set, and a slug's
-- type is fixed by its meta).
CREATE FUNCTION contact_slots_copy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_slots AS s (account_id, contact_id, string_1, string_2, string_3, string_4, number_1, number_2, number_3, number_4, boolean_1, boolean_2, boolean_3, boolean_4, date_1, date_2, date_3, date_4)
    SELECT a.account_id, a.contact_id,
           max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 1),
           max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 2),
           max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 3),
           max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 4),
           max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 1),
           max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 2),
           max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 3),
           max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 4),
           bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 1),
           bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 2),
           bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 3),
           bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 4),
           max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 1),
           max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 2),
           max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 3),
           max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 4)
    FROM written_attributes a
    JOIN attribute_metas m ON m.account_id = a.account_id AND m.slug = a.slug
    WHERE m.slot IS NOT NULL
    GROUP BY a.account_id, a.contact_id
    ON CONFLICT (account_id, contact_id) DO UPDATE SET
        string_1 = coalesce(excluded.string_1, s.string_1),
        string_2 = coalesce(excluded.string_2, s.string_2),
        string_3 = coalesce(excluded.string_3, s.string_3),
        string_4 = coalesce(excluded.string_4, s.string_4),
        number_1 = coalesce(excluded.number_1, s.number_1),
        number_2 = coalesce(excluded.number_2, s.number_2),
        number_3 = coalesce(excluded.number_3, s.number_3),
        number_4 = coalesce(excluded.number_4, s.number_4),
        boolean_1 = coalesce(excluded.boolean_1, s.boolean_1),
        boolean_2 = coalesce(excluded.boolean_2, s.boolean_2),
        boolean_3 = coalesce(excluded.boolean_3, s.boolean_3),
        boolean_4 = coalesce(excluded.boolean_4, s.boolean_4),
        date_1 = coalesce(excluded.date_1, s.date_1),
        date_2 = coalesce(excluded.date_2, s.date_2),
        date_3 = coalesce(excluded.date_3, s.date_3),
        date_4 = coalesce(excluded.date_4, s.date_4);
    RETURN NULL;
END $$;
CREATE TRIGGER contact_slots_copy_inserted
    AFTER INSERT ON contact_attributes REFERENCING NEW TABLE AS written_attributes
    FOR EACH STATEMENT EXECUTE FUNCTION contact_slots_copy();
CREATE TRIGGER contact_slots_copy_updated
    AFTER UPDATE ON contact_attributes REFERENCING NEW TABLE AS written_attributes
    FOR EACH STATEMENT EXECUTE FUNCTION contact_slots_copy();

ANALYZE contact_slots;
