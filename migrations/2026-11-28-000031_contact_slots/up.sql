-- Typed slots: a per-contact row with one typed column per attribute, for segment counts
-- that read one table at the pace of a flat table (docs/operations.md, "Typed slots").
--
-- `contact_attributes` stays the truth and serves every read of values. The first four
-- custom attributes of each type in an account (in the order their metas were created)
-- get a slot: a column of `contact_slots` that holds the same value for every
-- contact, NULL exactly when the contact has no value for that slug. Triggers keep the two
-- in step whatever writes the attributes (the API, the import, an event, SQL by hand):
--
-- - a new meta takes the lowest free slot of its type (`attribute_metas_take_slot`) and
--   copies any rows its slug already has (`attribute_metas_fill_slot`);
-- - a new contact gets its (empty) slot row (`contact_slots_add`);
-- - every insert or update of attribute rows copies the slotted values
--   (`contact_slots_copy`, one statement per statement, from the transition table);
-- - a deleted contact's row goes with it (foreign key). Attribute rows are never deleted
--   alone, and slots are never reassigned: the API neither deletes an attribute nor
--   changes its type.
--
-- `event.*` dates get no slot: an event moves its date forward on every event, the
-- hottest write of the audience, and a slot would turn each into a new slot row version
-- with an entry in every filled slot index (docs/operations.md, "Typed slots").
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
    string_1    text CHECK (length(string_1) <= 1000),
    string_2    text CHECK (length(string_2) <= 1000),
    string_3    text CHECK (length(string_3) <= 1000),
    string_4    text CHECK (length(string_4) <= 1000),
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

-- Every contact's row, with the values of its slotted attributes (a contact without any
-- has a row of NULLs, so `not_exists` and counts read this table alone).
INSERT INTO contact_slots (account_id, contact_id, string_1, string_2, string_3, string_4, number_1, number_2, number_3, number_4, boolean_1, boolean_2, boolean_3, boolean_4, date_1, date_2, date_3, date_4)
SELECT c.account_id, c.id,
       max(a.string_value) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 1),
       max(a.string_value) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 2),
       max(a.string_value) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 3),
       max(a.string_value) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 4),
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
FROM contacts c
LEFT JOIN contact_attributes a ON a.account_id = c.account_id AND a.contact_id = c.id
LEFT JOIN attribute_metas m ON m.account_id = a.account_id AND m.slug = a.slug AND m.slot IS NOT NULL
GROUP BY c.account_id, c.id;

-- One partial index per slot: a contact without the attribute has no entry. Strings
-- compare lowered, as in `contact_attributes_string_idx`.
CREATE INDEX contact_slots_string_1_idx ON contact_slots (account_id, lower(string_1)) WHERE string_1 IS NOT NULL;
CREATE INDEX contact_slots_string_2_idx ON contact_slots (account_id, lower(string_2)) WHERE string_2 IS NOT NULL;
CREATE INDEX contact_slots_string_3_idx ON contact_slots (account_id, lower(string_3)) WHERE string_3 IS NOT NULL;
CREATE INDEX contact_slots_string_4_idx ON contact_slots (account_id, lower(string_4)) WHERE string_4 IS NOT NULL;
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

-- PostgreSQL keeps no statistics for the expression of a partial index; without these,
-- `lower(string_1) = 'pro'` is estimated at 0.5 % of the rows whatever its share.
CREATE STATISTICS contact_slots_string_1_lower ON (lower(string_1)) FROM contact_slots;
CREATE STATISTICS contact_slots_string_2_lower ON (lower(string_2)) FROM contact_slots;
CREATE STATISTICS contact_slots_string_3_lower ON (lower(string_3)) FROM contact_slots;
CREATE STATISTICS contact_slots_string_4_lower ON (lower(string_4)) FROM contact_slots;

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
        'UPDATE contact_slots s SET %I = a.%I FROM contact_attributes a '
        'WHERE a.account_id = $1 AND a.slug = $2 '
        'AND s.account_id = a.account_id AND s.contact_id = a.contact_id',
        NEW.attribute_type || '_' || NEW.slot,
        CASE NEW.attribute_type WHEN 'boolean' THEN 'bool_value' ELSE NEW.attribute_type || '_value' END
    ) USING NEW.account_id, NEW.slug;
    RETURN NULL;
END $$;
CREATE TRIGGER attribute_metas_fill_slot
    AFTER INSERT ON attribute_metas
    FOR EACH ROW WHEN (NEW.slot IS NOT NULL) EXECUTE FUNCTION attribute_metas_fill_slot();

-- A new contact's row. ON CONFLICT: a contact id is never reused, but the row may exist
-- when a statement wrote the contact's attributes first.
CREATE FUNCTION contact_slots_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_slots (account_id, contact_id)
    SELECT account_id, id FROM new_contacts
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER contact_slots_add
    AFTER INSERT ON contacts REFERENCING NEW TABLE AS new_contacts
    FOR EACH STATEMENT EXECUTE FUNCTION contact_slots_add();

-- The slotted values a statement wrote, copied into their contacts' rows: one pivot per
-- contact (a statement writes a (contact, slug) at most once), each column set only when
-- the statement wrote its slug.
CREATE FUNCTION contact_slots_copy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE contact_slots s SET
        string_1 = CASE WHEN w.has_string_1 THEN w.string_1 ELSE s.string_1 END,
        string_2 = CASE WHEN w.has_string_2 THEN w.string_2 ELSE s.string_2 END,
        string_3 = CASE WHEN w.has_string_3 THEN w.string_3 ELSE s.string_3 END,
        string_4 = CASE WHEN w.has_string_4 THEN w.string_4 ELSE s.string_4 END,
        number_1 = CASE WHEN w.has_number_1 THEN w.number_1 ELSE s.number_1 END,
        number_2 = CASE WHEN w.has_number_2 THEN w.number_2 ELSE s.number_2 END,
        number_3 = CASE WHEN w.has_number_3 THEN w.number_3 ELSE s.number_3 END,
        number_4 = CASE WHEN w.has_number_4 THEN w.number_4 ELSE s.number_4 END,
        boolean_1 = CASE WHEN w.has_boolean_1 THEN w.boolean_1 ELSE s.boolean_1 END,
        boolean_2 = CASE WHEN w.has_boolean_2 THEN w.boolean_2 ELSE s.boolean_2 END,
        boolean_3 = CASE WHEN w.has_boolean_3 THEN w.boolean_3 ELSE s.boolean_3 END,
        boolean_4 = CASE WHEN w.has_boolean_4 THEN w.boolean_4 ELSE s.boolean_4 END,
        date_1 = CASE WHEN w.has_date_1 THEN w.date_1 ELSE s.date_1 END,
        date_2 = CASE WHEN w.has_date_2 THEN w.date_2 ELSE s.date_2 END,
        date_3 = CASE WHEN w.has_date_3 THEN w.date_3 ELSE s.date_3 END,
        date_4 = CASE WHEN w.has_date_4 THEN w.date_4 ELSE s.date_4 END
    FROM (
        SELECT a.account_id, a.contact_id,
               bool_or(m.attribute_type = 'string' AND m.slot = 1) AS has_string_1,
               max(a.string_value) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 1) AS string_1,
               bool_or(m.attribute_type = 'string' AND m.slot = 2) AS has_string_2,
               max(a.string_value) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 2) AS string_2,
               bool_or(m.attribute_type = 'string' AND m.slot = 3) AS has_string_3,
               max(a.string_value) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 3) AS string_3,
               bool_or(m.attribute_type = 'string' AND m.slot = 4) AS has_string_4,
               max(a.string_value) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 4) AS string_4,
               bool_or(m.attribute_type = 'number' AND m.slot = 1) AS has_number_1,
               max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 1) AS number_1,
               bool_or(m.attribute_type = 'number' AND m.slot = 2) AS has_number_2,
               max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 2) AS number_2,
               bool_or(m.attribute_type = 'number' AND m.slot = 3) AS has_number_3,
               max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 3) AS number_3,
               bool_or(m.attribute_type = 'number' AND m.slot = 4) AS has_number_4,
               max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 4) AS number_4,
               bool_or(m.attribute_type = 'boolean' AND m.slot = 1) AS has_boolean_1,
               bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 1) AS boolean_1,
               bool_or(m.attribute_type = 'boolean' AND m.slot = 2) AS has_boolean_2,
               bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 2) AS boolean_2,
               bool_or(m.attribute_type = 'boolean' AND m.slot = 3) AS has_boolean_3,
               bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 3) AS boolean_3,
               bool_or(m.attribute_type = 'boolean' AND m.slot = 4) AS has_boolean_4,
               bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 4) AS boolean_4,
               bool_or(m.attribute_type = 'date' AND m.slot = 1) AS has_date_1,
               max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 1) AS date_1,
               bool_or(m.attribute_type = 'date' AND m.slot = 2) AS has_date_2,
               max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 2) AS date_2,
               bool_or(m.attribute_type = 'date' AND m.slot = 3) AS has_date_3,
               max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 3) AS date_3,
               bool_or(m.attribute_type = 'date' AND m.slot = 4) AS has_date_4,
               max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 4) AS date_4
        FROM written_attributes a
        JOIN attribute_metas m ON m.account_id = a.account_id AND m.slug = a.slug
        WHERE m.slot IS NOT NULL
        GROUP BY a.account_id, a.contact_id
    ) w
    WHERE s.account_id = w.account_id AND s.contact_id = w.contact_id;
    RETURN NULL;
END $$;
CREATE TRIGGER contact_slots_copy_inserted
    AFTER INSERT ON contact_attributes REFERENCING NEW TABLE AS written_attributes
    FOR EACH STATEMENT EXECUTE FUNCTION contact_slots_copy();
CREATE TRIGGER contact_slots_copy_updated
    AFTER UPDATE ON contact_attributes REFERENCING NEW TABLE AS written_attributes
    FOR EACH STATEMENT EXECUTE FUNCTION contact_slots_copy();

ANALYZE contact_slots;
