-- Automations fire on contact events; announcements send one template to a segment
-- (docs/design.md#9-automations-and-announcements). Both only write messages: the outbox and its worker send them.

-- `once` automations fire at most once per contact, ever: the first event of the contact
-- inserts this row in the event's transaction, and a concurrent or later event finds it
-- taken (ON CONFLICT DO NOTHING) and queues nothing. A separate table, not a unique key on
-- messages, so the rule survives a message's deletion and a switch between once and
-- everytime.
CREATE TABLE automation_firings (
    account_id     uuid        NOT NULL,
    automation_id  uuid        NOT NULL,
    contact_id     uuid        NOT NULL,
    fired_at       timestamptz NOT NULL,
    PRIMARY KEY (account_id, automation_id, contact_id),
    FOREIGN KEY (account_id, automation_id) REFERENCES automations (account_id, id) ON DELETE CASCADE,
    FOREIGN KEY (account_id, contact_id) REFERENCES contacts (account_id, id) ON DELETE CASCADE
);

CREATE TABLE announcements (
    account_id               uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id                       uuid        NOT NULL,
    name                     text        NOT NULL,
    -- No foreign keys to the template and topic: an announcement is history and
    -- outlives both; a worker that finds the template gone fails the message.
    template_id              uuid        NOT NULL,
    -- The template's subject when the announcement was created.
    subject                  text        NOT NULL,
    topic_id                 uuid,
    include_unsubscribed     boolean     NOT NULL,
    -- The attribute conditions as received (already validated), re-read by the expansion.
    attributes               jsonb       NOT NULL DEFAULT '[]'::jsonb,
    status                   text        NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    -- Expansion progress: the greatest contact id whose message exists. Contacts are
    -- expanded in id order, so a restart resumes after it.
    last_sampled_contact_id  uuid,
    -- Set when the expansion has reached the end of the audience.
    expanded_at              timestamptz,
    audience_size            bigint      NOT NULL DEFAULT 0 CHECK (audience_size >= 0),
    -- Set with the final status.
    process_date             timestamptz,
    failure_reason           text,
    created_at               timestamptz NOT NULL,
    updated_at               timestamptz NOT NULL,
    PRIMARY KEY (account_id, id),
    CONSTRAINT announcements_final_check
        CHECK ((status = 'running') = (process_date IS NULL)),
    CONSTRAINT announcements_failure_check
        CHECK ((status = 'failed') = (failure_reason IS NOT NULL))
);
CREATE INDEX announcements_list_idx ON announcements (account_id, created_at, id);
-- The workers' scan for announcements still expanding or waiting for their messages.
CREATE INDEX announcements_running_idx ON announcements (created_at) WHERE status = 'running';

-- Which automation or announcement queued a message.
ALTER TABLE messages
    ADD COLUMN automation_id uuid,
    ADD COLUMN announcement_id uuid,
    ADD CONSTRAINT messages_origin_check CHECK (
        (kind = 'transactional' AND automation_id IS NULL AND announcement_id IS NULL)
        OR (kind = 'automation' AND automation_id IS NOT NULL AND announcement_id IS NULL)
        OR (kind = 'announcement' AND announcement_id IS NOT NULL AND automation_id IS NULL)
    ),
    -- One message per contact per announcement, whatever crashes and restarts happen
    -- during the expansion. Transactional and automation rows have NULL here and never
    -- collide.
    ADD CONSTRAINT messages_account_id_announcement_id_contact_id_key
        UNIQUE (account_id, announcement_id, contact_id);

-- An automation's message found, when due, that its automation was disabled or deleted.
ALTER TABLE messages DROP CONSTRAINT messages_skip_reason_check;
ALTER TABLE messages ADD CONSTRAINT messages_skip_reason_check CHECK (skip_reason IN
    ('bounce_blocked', 'complaint_blocked', 'unsubscribed', 'free_limit_capped', 'no_mail_server',
     'automation_disabled'));

-- Completion: an announcement is done when none of its messages is pending.
CREATE INDEX messages_announcement_pending_idx ON messages (account_id, announcement_id)
    WHERE announcement_id IS NOT NULL AND status IN ('queued', 'sending');
