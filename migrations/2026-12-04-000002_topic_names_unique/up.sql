-- Topics are told apart by name (on the unsubscribe and preferences page, in the
-- console's lists), so an account's topic names are unique in any letters' case, like
-- its segments' names. Topics that already share a name keep the oldest one's; each
-- later one gets the start of its id added, "News (01936c5e)", which no other topic has.
UPDATE topics AS later
   SET name = later.name || ' (' || left(later.id::text, 8) || ')'
  FROM topics AS first
 WHERE first.account_id = later.account_id
   AND lower(first.name) = lower(later.name)
   AND (first.created_at, first.id) < (later.created_at, later.id);
CREATE UNIQUE INDEX topics_account_id_name_key ON topics (account_id, lower(name));
