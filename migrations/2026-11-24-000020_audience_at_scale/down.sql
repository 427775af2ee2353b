DROP INDEX contacts_unsubscribed_idx;
DROP INDEX contact_attributes_string_idx;
CREATE INDEX contact_attributes_string_idx
    ON contact_attributes (account_id, slug, lower(string_value), contact_id) WHERE string_value IS NOT NULL;
