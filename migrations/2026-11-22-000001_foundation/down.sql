DROP TABLE topics;
DROP TABLE automations;
DROP TABLE templates;
DROP TABLE webhook_configs;
DROP TABLE memberships;
DROP TABLE accounts;
DROP TABLE tokens;
DROP TABLE users;
