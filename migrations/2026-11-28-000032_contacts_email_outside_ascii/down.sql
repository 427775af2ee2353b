DROP INDEX IF EXISTS contacts_email_outside_ascii_idx;
