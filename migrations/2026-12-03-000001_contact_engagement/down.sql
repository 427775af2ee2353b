ALTER TABLE contacts
    DROP COLUMN last_sent_at,
    DROP COLUMN last_opened_at,
    DROP COLUMN last_clicked_at,
    DROP COLUMN last_bounced_at;
