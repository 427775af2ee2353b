DROP INDEX mail_servers_unhealthy_idx;
ALTER TABLE mail_servers
    DROP CONSTRAINT mail_servers_health_check,
    DROP COLUMN last_error,
    DROP COLUMN unhealthy_since;
