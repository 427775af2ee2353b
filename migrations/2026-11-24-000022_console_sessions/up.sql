-- The admin console (docs/console.md): browser sessions and one-time login links. Both
-- keep only the SHA-256 of the value the browser or the link carries.

-- A signed-in browser. A session opened with a token acts with that token's scope and
-- pins and ends with it (the foreign key, and the check at every request); one opened
-- with a login link has full scope. The CSRF token is the synchronizer token of the
-- session's forms: it is no credential without the cookie, so it is stored as is.
CREATE TABLE console_sessions (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    secret_hash bytea NOT NULL UNIQUE CHECK (octet_length(secret_hash) = 32),
    csrf_token text NOT NULL CHECK (length(csrf_token) = 43),
    token_id uuid REFERENCES tokens (id) ON DELETE CASCADE,
    scope text NOT NULL CHECK (scope IN ('full', 'sending')),
    account_ids uuid[],
    user_agent text NOT NULL DEFAULT '' CHECK (length(user_agent) <= 200),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX console_sessions_user ON console_sessions (user_id, created_at);

-- A link printed by `mailroom user login-link`: 15 minutes, used once (used_at is set
-- by the one UPDATE that succeeds).
CREATE TABLE console_login_links (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    secret_hash bytea NOT NULL UNIQUE CHECK (octet_length(secret_hash) = 32),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
);
