-- Mail servers: the SMTP connections an account's mail goes out through.
-- The password is sealed by the application; the database sees ciphertext only.

CREATE TABLE mail_servers (
    account_id          uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id                  uuid        NOT NULL,
    service_type        text        NOT NULL CHECK (length(service_type) BETWEEN 1 AND 100),
    host                text        NOT NULL CHECK (length(host) BETWEEN 1 AND 253),
    port                integer     NOT NULL CHECK (port BETWEEN 1 AND 65535),
    secure              boolean     NOT NULL,
    require_tls         boolean     NOT NULL,
    allow_insecure_tls  boolean     NOT NULL DEFAULT false,
    username            text        NOT NULL,
    password            bytea       NOT NULL,
    default_from_email  text        NOT NULL,
    default_from_name   text        NOT NULL,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    PRIMARY KEY (account_id, id)
);

-- A template may name the server that carries its sends; that server cannot be deleted
-- while a template prefers it.
ALTER TABLE templates
    ADD CONSTRAINT templates_preferred_mail_server_fkey
    FOREIGN KEY (account_id, preferred_mail_server_id) REFERENCES mail_servers (account_id, id);
CREATE INDEX templates_preferred_mail_server_idx
    ON templates (account_id, preferred_mail_server_id) WHERE preferred_mail_server_id IS NOT NULL;
