-- The message log filtered by template (`GET …/messages?templateId=`, the console's
-- template filter) reads a range of this, in either order, instead of walking the
-- account's log. A message's template never changes, so this index adds work to the
-- insert of a message only: the claim's and the outcome's updates stay heap-only. Expand
-- only.
CREATE INDEX messages_template_list_idx ON messages (account_id, template_id, created_at, id);
