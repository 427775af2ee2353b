DROP INDEX IF EXISTS contacts_email_trgm_idx;
-- The extension stays: it may have been there before, or other objects may use it.
