-- The inbound SMTP listener finds the account of a VERP return-path address by its
-- domain (`bounces.<name>`) before it knows the account: one lookup by name across
-- accounts, only among domains verified by their own DKIM record (which proves control
-- of the domain; the return-path MX is the same for every account) whose return path is
-- verified too.
CREATE INDEX sending_domains_return_path_idx ON sending_domains (name)
    WHERE status = 'verified' AND return_path_status = 'verified';
