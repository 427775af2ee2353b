DROP INDEX IF EXISTS contacts_email_chars_idx;
