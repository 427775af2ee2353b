ALTER TABLE accounts DROP COLUMN refuse_clear_text_auth;
