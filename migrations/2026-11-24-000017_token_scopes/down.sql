ALTER TABLE tokens DROP COLUMN account_ids, DROP COLUMN scope;
