-- Scoped tokens (docs/api-decisions.md, "Scoped tokens"): what a token may call, and the
-- accounts it is pinned to (NULL: every account of its user). Existing tokens keep
-- today's behaviour: full scope, unpinned.
ALTER TABLE tokens
    ADD COLUMN scope text NOT NULL DEFAULT 'full' CHECK (scope IN ('full', 'sending')),
    ADD COLUMN account_ids uuid[] CHECK (
        account_ids IS NULL
        OR (cardinality(account_ids) BETWEEN 1 AND 100 AND array_position(account_ids, NULL) IS NULL)
    );

-- Team members (docs/api-decisions.md, "Team members"): admins manage members beside
-- the owner. The owner is the account's creator and stays for the account's life, so an
-- account never lacks a member who manages members: exactly one owner (the unique index),
-- never demoted nor removed while the account exists (the trigger; the API and the CLI
-- refuse first, this holds whatever writes).
ALTER TABLE memberships DROP CONSTRAINT memberships_role_check;
ALTER TABLE memberships
    ADD CONSTRAINT memberships_role_check CHECK (role IN ('owner', 'admin', 'member'));
CREATE UNIQUE INDEX memberships_one_owner ON memberships (account_id) WHERE role = 'owner';

CREATE FUNCTION memberships_owner_stays() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF OLD.role = 'owner' AND (NEW.role <> 'owner' OR NEW.user_id <> OLD.user_id
                                   OR NEW.account_id <> OLD.account_id) THEN
            RAISE EXCEPTION 'the owner of account % can be neither removed nor demoted', OLD.account_id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'memberships_owner_stays';
        END IF;
        RETURN NEW;
    END IF;
    -- A cascade from the account's own deletion runs after the account row is gone.
    IF OLD.role = 'owner' AND EXISTS (SELECT 1 FROM accounts WHERE id = OLD.account_id) THEN
        RAISE EXCEPTION 'the owner of account % can be neither removed nor demoted', OLD.account_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'memberships_owner_stays';
    END IF;
    RETURN OLD;
END;
$$;
CREATE TRIGGER memberships_owner_stays
    BEFORE UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION memberships_owner_stays();
