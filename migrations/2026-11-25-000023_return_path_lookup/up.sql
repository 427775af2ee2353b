-- The inbound SMTP listener finds the account of a VERP return-path address by its
-- domain (`bounces.<name>`) before it knows the account: one lookup by name across
-- accounts, only among domains whose return path is verified.
CREATE INDEX sending_domains_return_path_idx ON sending_domains (name)
    WHERE return_path_status = 'verified';
