//! Bulk contact writes for imports.
//!
//! Every statement takes whole columns as arrays and expands them with `unnest`, so a batch
//! costs at most five statements whatever its size, binds a handful of parameters (far
//! from PostgreSQL's 65,535 limit that a multi-row `VALUES` list would hit), and has one
//! plan shape for every batch.

use std::collections::{HashMap, HashSet};

use diesel::{
    pg::Pg,
    prelude::*,
    sql_types::{Array, BigInt, Bool, Float8, Nullable, Text, Timestamptz, Uuid as SqlUuid},
};
use mailroom_app::{
    ports::{ContactImportRepository, ImportedContact},
    StoreError,
};
use mailroom_domain::{attribute::AttributeValue, AccountId, Timestamp};
use time::OffsetDateTime;
use uuid::Uuid;

use super::PgUnitOfWork;
use crate::error::store_error;
use crate::prepared_sql::prepared_sql;
use crate::upkeep::{copy_into_slots, WrittenValues};

/// The custom attribute whose lower-cased string value is kept in `contacts.sort_name`.
const NAME_SLUG: &str = "name";

#[derive(QueryableByName)]
#[diesel(check_for_backend(Pg))]
struct InsertedId {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
}

#[derive(QueryableByName)]
#[diesel(check_for_backend(Pg))]
struct ExistingContact {
    /// 1-based position in the array of emails looked up.
    #[diesel(sql_type = BigInt)]
    position: i64,
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
}

/// `contact_attributes` rows as columns, one array per column.
#[derive(Default)]
struct AttributeColumns {
    contact_ids: Vec<Uuid>,
    slugs: Vec<String>,
    strings: Vec<Option<String>>,
    numbers: Vec<Option<f64>>,
    booleans: Vec<Option<bool>>,
    dates: Vec<Option<OffsetDateTime>>,
}

impl AttributeColumns {
    fn push(&mut self, contact: Uuid, slug: &str, value: &AttributeValue) {
        self.contact_ids.push(contact);
        self.slugs.push(slug.to_owned());
        let (mut string, mut number, mut boolean, mut date) = (None, None, None, None);
        match value {
            AttributeValue::String(text) => string = Some(text.clone()),
            AttributeValue::Number(value) => number = Some(*value),
            AttributeValue::Boolean(flag) => boolean = Some(*flag),
            AttributeValue::Date(at) => date = Some(at.as_datetime()),
        }
        self.strings.push(string);
        self.numbers.push(number);
        self.booleans.push(boolean);
        self.dates.push(date);
    }
}

/// The sort key a written `name` gives, as `set_attributes` computes it: the lower-cased
/// text, or none for a value of another type.
fn sort_name(contact: &ImportedContact) -> Option<Option<String>> {
    contact
        .values
        .iter()
        .find(|(slug, _)| slug == NAME_SLUG)
        .map(|(_, value)| match value {
            AttributeValue::String(text) => Some(text.to_lowercase()),
            _ => None,
        })
}

impl PgUnitOfWork<'_> {
    /// Inserts attribute rows; with `upsert`, a row that exists gets the new value.
    fn write_attributes(
        &mut self,
        account: AccountId,
        columns: &AttributeColumns,
        upsert: bool,
    ) -> Result<(), StoreError> {
        if columns.contact_ids.is_empty() {
            return Ok(());
        }
        let conflict = if upsert {
            " ON CONFLICT (account_id, contact_id, slug) DO UPDATE SET \
             string_value = excluded.string_value, number_value = excluded.number_value, \
             bool_value = excluded.bool_value, date_value = excluded.date_value"
        } else {
            ""
        };
        prepared_sql(format!(
            "INSERT INTO contact_attributes \
             (account_id, contact_id, slug, string_value, number_value, bool_value, date_value) \
             SELECT $1, t.contact_id, t.slug, t.string_value, t.number_value, t.bool_value, t.date_value \
             FROM unnest($2::uuid[], $3::text[], $4::text[], $5::float8[], $6::boolean[], $7::timestamptz[]) \
             AS t(contact_id, slug, string_value, number_value, bool_value, date_value){conflict}"
        ))
        .bind::<SqlUuid, _>(account.as_uuid())
        .bind::<Array<SqlUuid>, _>(&columns.contact_ids)
        .bind::<Array<Text>, _>(&columns.slugs)
        .bind::<Array<Nullable<Text>>, _>(&columns.strings)
        .bind::<Array<Nullable<Float8>>, _>(&columns.numbers)
        .bind::<Array<Nullable<Bool>>, _>(&columns.booleans)
        .bind::<Array<Nullable<Timestamptz>>, _>(&columns.dates)
        .execute(self.conn)
        .map_err(store_error)?;
        // The typed slots of the contacts written, from the values written.
        copy_into_slots(
            self.conn,
            account.as_uuid(),
            &WrittenValues {
                contacts: &columns.contact_ids,
                slugs: &columns.slugs,
                strings: &columns.strings,
                numbers: &columns.numbers,
                booleans: &columns.booleans,
                dates: &columns.dates,
            },
        )
    }
}

impl ContactImportRepository for PgUnitOfWork<'_> {
    fn import_contacts(
        &mut self,
        account: AccountId,
        contacts: &[ImportedContact],
        now: Timestamp,
    ) -> Result<Vec<bool>, StoreError> {
        // Rows are written in email order so that concurrent imports of overlapping files
        // take their row locks in the same order and cannot deadlock each other.
        let mut order: Vec<usize> = (0..contacts.len()).collect();
        let lowered: Vec<String> = contacts
            .iter()
            .map(|contact| contact.email.normalized())
            .collect();
        order.sort_by(|a, b| lowered[*a].cmp(&lowered[*b]));

        // 1. Create the unknown ones. The sort key of a new contact is written with it;
        //    ON CONFLICT DO NOTHING waits for a concurrent insert of the same email to
        //    commit, so step 2 then finds that contact.
        let new_ids: Vec<Uuid> = order
            .iter()
            .map(|&i| contacts[i].new_id.as_uuid())
            .collect();
        let emails: Vec<&str> = order.iter().map(|&i| contacts[i].email.as_str()).collect();
        let sort_names: Vec<Option<String>> = order
            .iter()
            .map(|&i| sort_name(&contacts[i]).flatten())
            .collect();
        let inserted: Vec<InsertedId> = prepared_sql(
            "INSERT INTO contacts (account_id, id, email, created_at, sort_name) \
             SELECT $1, t.id, t.email, $2, t.sort_name \
             FROM unnest($3::uuid[], $4::text[], $5::text[]) AS t(id, email, sort_name) \
             ON CONFLICT (account_id, email_lower) DO NOTHING \
             RETURNING id",
        )
        .bind::<SqlUuid, _>(account.as_uuid())
        .bind::<Timestamptz, _>(now.as_datetime())
        .bind::<Array<SqlUuid>, _>(&new_ids)
        .bind::<Array<Text>, _>(&emails)
        .bind::<Array<Nullable<Text>>, _>(&sort_names)
        .load(self.conn)
        .map_err(store_error)?;
        let created: HashSet<Uuid> = inserted.into_iter().map(|row| row.id).collect();

        // 2. Find the ids of the others. PostgreSQL lowers the emails itself, so the match
        //    is exactly the one the unique constraint enforces.
        let mut ids: Vec<Uuid> = new_ids.clone();
        let existing: Vec<usize> = (0..order.len())
            .filter(|&k| !created.contains(&new_ids[k]))
            .collect();
        if !existing.is_empty() {
            let lookup: Vec<&str> = existing.iter().map(|&k| emails[k]).collect();
            let found: Vec<ExistingContact> = prepared_sql(
                "SELECT t.position, c.id \
                 FROM unnest($2::text[]) WITH ORDINALITY AS t(email, position) \
                 JOIN contacts c ON c.account_id = $1 AND c.email_lower = lower(t.email)",
            )
            .bind::<SqlUuid, _>(account.as_uuid())
            .bind::<Array<Text>, _>(&lookup)
            .load(self.conn)
            .map_err(store_error)?;
            let mut found_any = vec![false; existing.len()];
            for row in found {
                let slot = usize::try_from(row.position - 1)
                    .ok()
                    .filter(|slot| *slot < existing.len())
                    .ok_or_else(|| {
                        StoreError::Other(format!(
                            "import lookup returned position {}",
                            row.position
                        ))
                    })?;
                ids[existing[slot]] = row.id;
                found_any[slot] = true;
            }
            if let Some(missing) = found_any.iter().position(|found| !found) {
                return Err(StoreError::Other(format!(
                    "imported contact {} was neither created nor found",
                    lookup[missing]
                )));
            }
        }

        // 3. Write the attribute values. Two inputs could still name one contact when
        //    PostgreSQL's lower() folds emails that Rust's does not; one statement cannot
        //    update a row twice, so the later input's value of a slug wins here.
        let mut latest: HashMap<(Uuid, &str), (usize, &AttributeValue)> = HashMap::new();
        for (k, &i) in order.iter().enumerate() {
            for (slug, value) in &contacts[i].values {
                let key = (ids[k], slug.as_str());
                match latest.get(&key) {
                    Some((later, _)) if *later > i => {}
                    _ => {
                        latest.insert(key, (i, value));
                    }
                }
            }
        }
        let mut keys: Vec<(Uuid, &str)> = latest.keys().copied().collect();
        keys.sort_unstable();
        // A contact created by this transaction has no attributes yet and no other
        // transaction can add any before it commits, so its rows are plain inserts: that
        // skips the speculative insertion ON CONFLICT costs on every row.
        let (mut fresh, mut existing) = (AttributeColumns::default(), AttributeColumns::default());
        for key in keys {
            if let Some((_, value)) = latest.get(&key) {
                let columns = if created.contains(&key.0) {
                    &mut fresh
                } else {
                    &mut existing
                };
                columns.push(key.0, key.1, value);
            }
        }
        self.write_attributes(account, &fresh, false)?;
        self.write_attributes(account, &existing, true)?;

        // 4. Existing contacts that were given a `name` get their sort key updated (new
        //    ones got it at insert).
        let (renamed, renamed_to): (Vec<Uuid>, Vec<Option<String>>) = order
            .iter()
            .enumerate()
            .filter(|(k, _)| !created.contains(&new_ids[*k]))
            .filter_map(|(k, &i)| Some((ids[k], sort_name(&contacts[i])?)))
            .unzip();
        if !renamed.is_empty() {
            prepared_sql(
                "UPDATE contacts SET sort_name = t.sort_name \
                 FROM unnest($2::uuid[], $3::text[]) AS t(id, sort_name) \
                 WHERE contacts.account_id = $1 AND contacts.id = t.id",
            )
            .bind::<SqlUuid, _>(account.as_uuid())
            .bind::<Array<SqlUuid>, _>(&renamed)
            .bind::<Array<Nullable<Text>>, _>(&renamed_to)
            .execute(self.conn)
            .map_err(store_error)?;
        }

        let mut was_created = vec![false; contacts.len()];
        for (k, &i) in order.iter().enumerate() {
            was_created[i] = created.contains(&new_ids[k]);
        }
        Ok(was_created)
    }
}
