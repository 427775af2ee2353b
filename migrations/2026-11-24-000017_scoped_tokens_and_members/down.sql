DROP TRIGGER memberships_owner_stays ON memberships;
DROP FUNCTION memberships_owner_stays();
DROP INDEX memberships_one_owner;
UPDATE memberships SET role = 'member' WHERE role = 'admin';
ALTER TABLE memberships DROP CONSTRAINT memberships_role_check;
ALTER TABLE memberships ADD CONSTRAINT memberships_role_check CHECK (role IN ('owner', 'member'));
ALTER TABLE tokens DROP COLUMN account_ids, DROP COLUMN scope;
