-- Mail server health: set when the server refuses Mailroom itself (AUTH 535,
-- a 5xx to the greeting or EHLO, "authentication required" to MAIL FROM), cleared by the
-- next message it takes and by every save. Both NULL: healthy.
ALTER TABLE mail_servers
    ADD COLUMN unhealthy_since timestamptz NULL,
    ADD COLUMN last_error      text        NULL,
    ADD CONSTRAINT mail_servers_health_check
        CHECK ((unhealthy_since IS NULL) = (last_error IS NULL));

-- /metrics counts the unhealthy servers on every scrape.
CREATE INDEX mail_servers_unhealthy_idx ON mail_servers (unhealthy_since)
    WHERE unhealthy_since IS NOT NULL;
