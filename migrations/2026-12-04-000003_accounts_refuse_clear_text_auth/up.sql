-- An account may refuse to send a mail server's password over a connection without TLS
-- (docs/api-decisions.md, "Clear-text authentication"): its servers with a user then
-- need STARTTLS, whatever their `requireTLS`. Off by default, as before. Expand only: a
-- constant default adds the column without rewriting the table.
ALTER TABLE accounts ADD COLUMN refuse_clear_text_auth boolean NOT NULL DEFAULT false;
