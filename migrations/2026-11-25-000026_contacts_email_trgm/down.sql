DROP INDEX contacts_email_trgm_idx;
-- The extension is left in place: other objects may have come to depend on it.
