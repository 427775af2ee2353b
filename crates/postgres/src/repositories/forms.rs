use diesel::prelude::*;
use mailroom_app::{
    ports::{FormConfirmation, FormRepository},
    StoreError,
};
use mailroom_domain::{
    form::{Form, FormSettings, RedirectUrl},
    paging::PageRequest,
    AccountId, ContactId, FormConfirmationId, FormId, TemplateId, Timestamp, TopicId,
};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{corrupt, templates::page_bounds, timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    schema::{contacts, form_confirmations, forms, topic_unsubscriptions},
};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = forms, check_for_backend(diesel::pg::Pg))]
struct FormRow {
    account_id: Uuid,
    id: Uuid,
    name: String,
    topic_ids: Vec<Uuid>,
    attributes: Vec<String>,
    double_opt_in: bool,
    confirmation_template_id: Option<Uuid>,
    success_redirect_url: Option<String>,
    confirmation_redirect_url: Option<String>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

fn redirect(column: &str, text: Option<String>) -> Result<Option<RedirectUrl>, StoreError> {
    text.map(|text| RedirectUrl::parse(&text).map_err(|error| corrupt(column, error)))
        .transpose()
}

impl TryFrom<FormRow> for Form {
    type Error = StoreError;

    fn try_from(row: FormRow) -> Result<Self, StoreError> {
        Ok(Self {
            id: FormId::from_uuid(row.id),
            settings: FormSettings {
                name: row.name,
                topic_ids: row.topic_ids.into_iter().map(TopicId::from_uuid).collect(),
                attributes: row.attributes,
                double_opt_in: row.double_opt_in,
                confirmation_template_id: row.confirmation_template_id.map(TemplateId::from_uuid),
                success_redirect_url: redirect(
                    "forms.success_redirect_url",
                    row.success_redirect_url,
                )?,
                confirmation_redirect_url: redirect(
                    "forms.confirmation_redirect_url",
                    row.confirmation_redirect_url,
                )?,
            },
            created_at: timestamp(row.created_at),
            updated_at: timestamp(row.updated_at),
        })
    }
}

fn form_row(account: AccountId, form: &Form) -> FormRow {
    let settings = &form.settings;
    FormRow {
        account_id: account.as_uuid(),
        id: form.id.as_uuid(),
        name: settings.name.clone(),
        topic_ids: settings.topic_ids.iter().map(TopicId::as_uuid).collect(),
        attributes: settings.attributes.clone(),
        double_opt_in: settings.double_opt_in,
        confirmation_template_id: settings.confirmation_template_id.map(|id| id.as_uuid()),
        success_redirect_url: settings
            .success_redirect_url
            .as_ref()
            .map(|url| url.as_str().to_owned()),
        confirmation_redirect_url: settings
            .confirmation_redirect_url
            .as_ref()
            .map(|url| url.as_str().to_owned()),
        created_at: form.created_at.as_datetime(),
        updated_at: form.updated_at.as_datetime(),
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = form_confirmations, check_for_backend(diesel::pg::Pg))]
struct ConfirmationRow {
    account_id: Uuid,
    id: Uuid,
    form_id: Uuid,
    contact_id: Uuid,
    attributes: Value,
    created_at: OffsetDateTime,
    confirmed_at: Option<OffsetDateTime>,
}

impl TryFrom<ConfirmationRow> for FormConfirmation {
    type Error = StoreError;

    fn try_from(row: ConfirmationRow) -> Result<Self, StoreError> {
        let Value::Object(attributes) = row.attributes else {
            return Err(corrupt("form_confirmations.attributes", "not an object"));
        };
        Ok(Self {
            id: FormConfirmationId::from_uuid(row.id),
            form_id: FormId::from_uuid(row.form_id),
            contact_id: ContactId::from_uuid(row.contact_id),
            attributes,
            created_at: timestamp(row.created_at),
            confirmed_at: row.confirmed_at.map(timestamp),
        })
    }
}

impl FormRepository for PgUnitOfWork<'_> {
    fn list_forms(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<Form>, StoreError> {
        let (offset, limit) = page_bounds(page);
        forms::table
            .filter(forms::account_id.eq(account.as_uuid()))
            .order((forms::created_at.asc(), forms::id.asc()))
            .offset(offset)
            .limit(limit)
            .select(FormRow::as_select())
            .load(self.conn)
            .map_err(store_error)?
            .into_iter()
            .map(Form::try_from)
            .collect()
    }

    fn count_forms(&mut self, account: AccountId) -> Result<u64, StoreError> {
        forms::table
            .filter(forms::account_id.eq(account.as_uuid()))
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn lock_and_count_forms(&mut self, account: AccountId) -> Result<u64, StoreError> {
        // An advisory lock, as for the accounts of an owner: it orders the creations of
        // one account's forms, and other accounts never wait.
        crate::prepared_sql::prepared_sql(
            "SELECT pg_advisory_xact_lock(hashtextextended('account forms ' || $1::text, 0))",
        )
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .execute(self.conn)
        .map_err(store_error)?;
        self.count_forms(account)
    }

    fn find_form(&mut self, account: AccountId, id: FormId) -> Result<Option<Form>, StoreError> {
        forms::table
            .find((account.as_uuid(), id.as_uuid()))
            .select(FormRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(Form::try_from)
            .transpose()
    }

    fn forms_confirming_with(
        &mut self,
        account: AccountId,
        template: TemplateId,
    ) -> Result<Vec<String>, StoreError> {
        forms::table
            .filter(forms::account_id.eq(account.as_uuid()))
            .filter(forms::confirmation_template_id.eq(template.as_uuid()))
            .order((forms::created_at.asc(), forms::id.asc()))
            .select(forms::name)
            .load(self.conn)
            .map_err(store_error)
    }

    fn insert_form(&mut self, account: AccountId, form: &Form) -> Result<(), StoreError> {
        diesel::insert_into(forms::table)
            .values(form_row(account, form))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn update_form(&mut self, account: AccountId, form: &Form) -> Result<(), StoreError> {
        let row = form_row(account, form);
        diesel::update(forms::table.find((account.as_uuid(), form.id.as_uuid())))
            .set((
                forms::name.eq(row.name),
                forms::topic_ids.eq(row.topic_ids),
                forms::attributes.eq(row.attributes),
                forms::double_opt_in.eq(row.double_opt_in),
                forms::confirmation_template_id.eq(row.confirmation_template_id),
                forms::success_redirect_url.eq(row.success_redirect_url),
                forms::confirmation_redirect_url.eq(row.confirmation_redirect_url),
                forms::updated_at.eq(row.updated_at),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn delete_form(&mut self, account: AccountId, id: FormId) -> Result<bool, StoreError> {
        diesel::delete(
            form_confirmations::table
                .filter(form_confirmations::account_id.eq(account.as_uuid()))
                .filter(form_confirmations::form_id.eq(id.as_uuid())),
        )
        .execute(self.conn)
        .map_err(store_error)?;
        diesel::delete(forms::table.find((account.as_uuid(), id.as_uuid())))
            .execute(self.conn)
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn mark_contact_pending(
        &mut self,
        account: AccountId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        diesel::update(
            contacts::table
                .find((account.as_uuid(), contact.as_uuid()))
                .filter(contacts::pending_since.is_null()),
        )
        .set(contacts::pending_since.eq(now.as_datetime()))
        .execute(self.conn)
        .map(drop)
        .map_err(store_error)
    }

    fn confirm_contact(
        &mut self,
        account: AccountId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        diesel::update(contacts::table.find((account.as_uuid(), contact.as_uuid())))
            .set((
                contacts::pending_since.eq(None::<OffsetDateTime>),
                contacts::confirmed_at.eq(now.as_datetime()),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn resubscribe_contact_to_topics(
        &mut self,
        account: AccountId,
        contact: ContactId,
        topics: &[TopicId],
    ) -> Result<u64, StoreError> {
        if topics.is_empty() {
            return Ok(0);
        }
        let ids: Vec<Uuid> = topics.iter().map(TopicId::as_uuid).collect();
        diesel::delete(
            topic_unsubscriptions::table
                .filter(topic_unsubscriptions::account_id.eq(account.as_uuid()))
                .filter(topic_unsubscriptions::contact_id.eq(contact.as_uuid()))
                .filter(topic_unsubscriptions::topic_id.eq_any(ids)),
        )
        .execute(self.conn)
        .map(|n| u64::try_from(n).unwrap_or(0))
        .map_err(store_error)
    }

    fn insert_form_confirmation(
        &mut self,
        account: AccountId,
        confirmation: &FormConfirmation,
    ) -> Result<(), StoreError> {
        diesel::insert_into(form_confirmations::table)
            .values(ConfirmationRow {
                account_id: account.as_uuid(),
                id: confirmation.id.as_uuid(),
                form_id: confirmation.form_id.as_uuid(),
                contact_id: confirmation.contact_id.as_uuid(),
                attributes: Value::Object(confirmation.attributes.clone()),
                created_at: confirmation.created_at.as_datetime(),
                confirmed_at: confirmation.confirmed_at.map(|at| at.as_datetime()),
            })
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn lock_and_count_form_confirmations(
        &mut self,
        account: AccountId,
        contact: ContactId,
        since: Timestamp,
    ) -> Result<u64, StoreError> {
        contacts::table
            .find((account.as_uuid(), contact.as_uuid()))
            .select(contacts::id)
            .for_no_key_update()
            .first::<Uuid>(self.conn)
            .optional()
            .map_err(store_error)?;
        form_confirmations::table
            .filter(form_confirmations::account_id.eq(account.as_uuid()))
            .filter(form_confirmations::contact_id.eq(contact.as_uuid()))
            .filter(form_confirmations::created_at.gt(since.as_datetime()))
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn find_form_confirmation(
        &mut self,
        account: AccountId,
        id: FormConfirmationId,
    ) -> Result<Option<FormConfirmation>, StoreError> {
        form_confirmations::table
            .find((account.as_uuid(), id.as_uuid()))
            .select(ConfirmationRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(FormConfirmation::try_from)
            .transpose()
    }

    fn use_form_confirmation(
        &mut self,
        account: AccountId,
        id: FormConfirmationId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        diesel::update(
            form_confirmations::table
                .find((account.as_uuid(), id.as_uuid()))
                .filter(form_confirmations::confirmed_at.is_null()),
        )
        .set(form_confirmations::confirmed_at.eq(now.as_datetime()))
        .execute(self.conn)
        .map(|n| n > 0)
        .map_err(store_error)
    }

    fn prune_form_confirmations(
        &mut self,
        account: AccountId,
        contact: ContactId,
        before: Timestamp,
    ) -> Result<(), StoreError> {
        diesel::delete(
            form_confirmations::table
                .filter(form_confirmations::account_id.eq(account.as_uuid()))
                .filter(form_confirmations::contact_id.eq(contact.as_uuid()))
                .filter(form_confirmations::created_at.lt(before.as_datetime())),
        )
        .execute(self.conn)
        .map(drop)
        .map_err(store_error)
    }
}
