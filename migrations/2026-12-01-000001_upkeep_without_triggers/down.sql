-- The triggers and functions as migration 37 left them (bodies copied from migrations
-- 17, 25, 30, 31 and 35). The tables they keep are consistent when this runs: the
-- repository kept them so.

CREATE FUNCTION announcement_counters_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, skipped)
    SELECT account_id, announcement_id, pg_backend_pid(),
           count(*) FILTER (WHERE state = 'queued'),
           count(*) FILTER (WHERE state = 'sending'),
           count(*) FILTER (WHERE state = 'sent'),
           count(*) FILTER (WHERE state = 'failed'),
           count(*) FILTER (WHERE state = 'bounced'),
           count(*) FILTER (WHERE state = 'skipped')
    FROM (SELECT account_id, announcement_id, message_state(status, lease_token) AS state
          FROM inserted_rows WHERE announcement_id IS NOT NULL) AS r
    GROUP BY account_id, announcement_id
    ORDER BY account_id, announcement_id
    ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET
        queued = c.queued + EXCLUDED.queued,
        sending = c.sending + EXCLUDED.sending,
        sent = c.sent + EXCLUDED.sent,
        failed = c.failed + EXCLUDED.failed,
        bounced = c.bounced + EXCLUDED.bounced,
        skipped = c.skipped + EXCLUDED.skipped;
    RETURN NULL;
END
$$;

CREATE FUNCTION announcement_counters_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM new_rows WHERE announcement_id IS NOT NULL)
       AND NOT EXISTS (SELECT FROM old_rows WHERE announcement_id IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, skipped)
    SELECT g.* FROM (
        SELECT d.account_id, d.announcement_id, pg_backend_pid(),
               coalesce(sum(d.n) FILTER (WHERE d.state = 'queued'), 0) AS queued,
               coalesce(sum(d.n) FILTER (WHERE d.state = 'sending'), 0) AS sending,
               coalesce(sum(d.n) FILTER (WHERE d.state = 'sent'), 0) AS sent,
               coalesce(sum(d.n) FILTER (WHERE d.state = 'failed'), 0) AS failed,
               coalesce(sum(d.n) FILTER (WHERE d.state = 'bounced'), 0) AS bounced,
               coalesce(sum(d.n) FILTER (WHERE d.state = 'skipped'), 0) AS skipped
        FROM (SELECT account_id, announcement_id, message_state(status, lease_token) AS state,
                     1 AS n FROM new_rows
              WHERE announcement_id IS NOT NULL
              UNION ALL
              SELECT account_id, announcement_id, message_state(status, lease_token), -1
              FROM old_rows
              WHERE announcement_id IS NOT NULL) AS d
        GROUP BY d.account_id, d.announcement_id) AS g
    WHERE (g.queued, g.sending, g.sent, g.failed, g.bounced, g.skipped) <> (0, 0, 0, 0, 0, 0)
    ORDER BY g.account_id, g.announcement_id
    ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET
        queued = c.queued + EXCLUDED.queued,
        sending = c.sending + EXCLUDED.sending,
        sent = c.sent + EXCLUDED.sent,
        failed = c.failed + EXCLUDED.failed,
        bounced = c.bounced + EXCLUDED.bounced,
        skipped = c.skipped + EXCLUDED.skipped;
    RETURN NULL;
END
$$;

CREATE FUNCTION announcement_counters_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, skipped)
    SELECT g.* FROM (
        SELECT account_id, announcement_id, pg_backend_pid(),
               -count(*) FILTER (WHERE state = 'queued'),
               -count(*) FILTER (WHERE state = 'sending'),
               -count(*) FILTER (WHERE state = 'sent'),
               -count(*) FILTER (WHERE state = 'failed'),
               -count(*) FILTER (WHERE state = 'bounced'),
               -count(*) FILTER (WHERE state = 'skipped')
        FROM (SELECT account_id, announcement_id, message_state(status, lease_token) AS state
              FROM deleted_rows WHERE announcement_id IS NOT NULL) AS r
        GROUP BY account_id, announcement_id) AS g
    WHERE EXISTS (SELECT FROM announcements a
                  WHERE a.account_id = g.account_id AND a.id = g.announcement_id)
    ORDER BY g.account_id, g.announcement_id
    ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET
        queued = c.queued + EXCLUDED.queued,
        sending = c.sending + EXCLUDED.sending,
        sent = c.sent + EXCLUDED.sent,
        failed = c.failed + EXCLUDED.failed,
        bounced = c.bounced + EXCLUDED.bounced,
        skipped = c.skipped + EXCLUDED.skipped;
    RETURN NULL;
END
$$;

CREATE FUNCTION delivery_lanes_bring_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO delivery_lanes AS lane (account_id, next_due_at)
    SELECT account_id, min(next_attempt_at) FROM queued_rows
    WHERE status = 'queued' AND lease_token IS NULL
    GROUP BY account_id
    ORDER BY account_id
    ON CONFLICT (account_id) DO UPDATE
        SET next_due_at = least(lane.next_due_at, EXCLUDED.next_due_at)
        WHERE lane.next_due_at IS NULL OR lane.next_due_at > EXCLUDED.next_due_at;
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_inserted_bring_lanes_forward
    AFTER INSERT ON messages REFERENCING NEW TABLE AS queued_rows
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_lanes_bring_forward();
CREATE TRIGGER messages_updated_bring_lanes_forward
    AFTER UPDATE ON messages REFERENCING NEW TABLE AS queued_rows
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_lanes_bring_forward();

CREATE FUNCTION webhook_lanes_bring_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_lanes AS lane (account_id, next_due_at)
    SELECT account_id, min(next_attempt_at) FROM pending_rows
    WHERE status IN ('queued', 'retrying') AND lease_token IS NULL
    GROUP BY account_id
    ORDER BY account_id
    ON CONFLICT (account_id) DO UPDATE
        SET next_due_at = least(lane.next_due_at, EXCLUDED.next_due_at)
        WHERE lane.next_due_at IS NULL OR lane.next_due_at > EXCLUDED.next_due_at;
    RETURN NULL;
END
$$;

CREATE TRIGGER webhook_events_inserted_bring_lanes_forward
    AFTER INSERT ON webhook_events REFERENCING NEW TABLE AS pending_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_lanes_bring_forward();
CREATE TRIGGER webhook_events_updated_bring_lanes_forward
    AFTER UPDATE ON webhook_events REFERENCING NEW TABLE AS pending_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_lanes_bring_forward();

CREATE TRIGGER messages_inserted_count_announcements
    AFTER INSERT ON messages REFERENCING NEW TABLE AS inserted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION announcement_counters_on_insert();
CREATE TRIGGER messages_updated_count_announcements
    AFTER UPDATE ON messages REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION announcement_counters_on_update();
CREATE TRIGGER messages_deleted_count_announcements
    AFTER DELETE ON messages REFERENCING OLD TABLE AS deleted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION announcement_counters_on_delete();

CREATE FUNCTION announcement_engagement_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, opened, clicked)
    SELECT m.account_id, m.announcement_id, pg_backend_pid(),
           count(t.opened_at), count(t.clicked_at)
    FROM inserted_rows t
    JOIN messages m ON m.account_id = t.account_id AND m.id = t.message_id
    WHERE m.announcement_id IS NOT NULL
      AND (t.opened_at IS NOT NULL OR t.clicked_at IS NOT NULL)
    GROUP BY m.account_id, m.announcement_id
    ORDER BY m.account_id, m.announcement_id
    ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET
        opened = c.opened + EXCLUDED.opened,
        clicked = c.clicked + EXCLUDED.clicked;
    RETURN NULL;
END
$$;

CREATE FUNCTION announcement_engagement_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, opened, clicked)
    SELECT m.account_id, m.announcement_id, pg_backend_pid(),
           count(*) FILTER (WHERE o.opened_at IS NULL AND t.opened_at IS NOT NULL),
           count(*) FILTER (WHERE o.clicked_at IS NULL AND t.clicked_at IS NOT NULL)
    FROM new_rows t
    JOIN old_rows o ON o.account_id = t.account_id AND o.message_id = t.message_id
    JOIN messages m ON m.account_id = t.account_id AND m.id = t.message_id
    WHERE m.announcement_id IS NOT NULL
      AND ((o.opened_at IS NULL AND t.opened_at IS NOT NULL)
           OR (o.clicked_at IS NULL AND t.clicked_at IS NOT NULL))
    GROUP BY m.account_id, m.announcement_id
    ORDER BY m.account_id, m.announcement_id
    ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET
        opened = c.opened + EXCLUDED.opened,
        clicked = c.clicked + EXCLUDED.clicked;
    RETURN NULL;
END
$$;

CREATE TRIGGER message_tracking_inserted_count_announcements
    AFTER INSERT ON message_tracking REFERENCING NEW TABLE AS inserted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION announcement_engagement_on_insert();
CREATE TRIGGER message_tracking_updated_count_announcements
    AFTER UPDATE ON message_tracking REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION announcement_engagement_on_update();

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

CREATE FUNCTION memberships_owner_stays() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF OLD.role = 'owner' AND (NEW.role <> 'owner' OR NEW.user_id <> OLD.user_id
                                   OR NEW.account_id <> OLD.account_id) THEN
            RAISE EXCEPTION 'the owner of account % can be neither removed nor demoted', OLD.account_id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'memberships_owner_stays';
        END IF;
        RETURN NEW;
    END IF;
    -- A cascade from the account's own deletion runs after the account row is gone.
    IF OLD.role = 'owner' AND EXISTS (SELECT 1 FROM accounts WHERE id = OLD.account_id) THEN
        RAISE EXCEPTION 'the owner of account % can be neither removed nor demoted', OLD.account_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'memberships_owner_stays';
    END IF;
    RETURN OLD;
END;
$$;
CREATE TRIGGER memberships_owner_stays
    BEFORE UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION memberships_owner_stays();
