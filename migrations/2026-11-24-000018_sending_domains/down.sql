DROP TABLE sending_domain_keys;
DROP TABLE sending_domains;
