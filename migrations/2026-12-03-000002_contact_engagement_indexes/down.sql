DROP INDEX contacts_last_opened_idx;
DROP INDEX contacts_last_clicked_idx;
DROP INDEX contacts_last_bounced_idx;
