-- Sending domains (docs/operations.md, "Sending domains"): the domains an account proves
-- through DNS that it sends from, each with its DKIM keys. Statuses are those of the
-- latest check; names are lower-cased by the application.
CREATE TABLE sending_domains (
    account_id         uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id                 uuid        NOT NULL,
    name               text        NOT NULL CHECK (length(name) BETWEEN 3 AND 200 AND name = lower(name)),
    status             text        NOT NULL CHECK (status IN ('pending', 'verified', 'failed')),
    spf_status         text        NOT NULL CHECK (spf_status IN ('pending', 'verified', 'failed')),
    dmarc_status       text        NOT NULL CHECK (dmarc_status IN ('pending', 'verified', 'failed')),
    return_path_status text        NOT NULL CHECK (return_path_status IN ('pending', 'verified', 'failed')),
    created_at         timestamptz NOT NULL,
    verified_at        timestamptz NULL,
    checked_at         timestamptz NULL,
    PRIMARY KEY (account_id, id),
    UNIQUE (account_id, name)
);

-- One row per DKIM key; the newest of a domain signs, older ones stay published (and
-- checked) until removed. `private_key` is sealed like every stored secret (PKCS#1 PEM
-- inside), bound to (account_id, id).
CREATE TABLE sending_domain_keys (
    account_id  uuid        NOT NULL,
    id          uuid        NOT NULL,
    domain_id   uuid        NOT NULL,
    selector    text        NOT NULL CHECK (selector ~ '^[a-z0-9]{1,32}$'),
    private_key bytea       NOT NULL,
    public_key  text        NOT NULL CHECK (length(public_key) BETWEEN 1 AND 4096),
    status      text        NOT NULL CHECK (status IN ('pending', 'verified', 'failed')),
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (account_id, id),
    UNIQUE (account_id, domain_id, selector),
    FOREIGN KEY (account_id, domain_id) REFERENCES sending_domains (account_id, id) ON DELETE CASCADE
);
CREATE INDEX sending_domain_keys_domain_idx ON sending_domain_keys (account_id, domain_id, created_at);
