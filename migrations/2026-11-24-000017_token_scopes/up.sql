-- Scoped tokens (docs/api-decisions.md, "Scoped tokens"): what a token may call, and the
-- accounts it is pinned to (NULL: every account of its user). Existing tokens keep
-- today's behaviour: full scope, unpinned.
ALTER TABLE tokens
    ADD COLUMN scope text NOT NULL DEFAULT 'full' CHECK (scope IN ('full', 'sending')),
    ADD COLUMN account_ids uuid[] CHECK (
        account_ids IS NULL
        OR (cardinality(account_ids) BETWEEN 1 AND 100 AND array_position(account_ids, NULL) IS NULL)
    );
