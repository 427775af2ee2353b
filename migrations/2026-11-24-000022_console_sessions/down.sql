DROP TABLE console_login_links;
DROP TABLE console_sessions;
