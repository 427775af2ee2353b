use diesel::prelude::*;
use mailroom_app::{ports::TemplateRepository, StoreError};
use mailroom_domain::{
    paging::PageRequest,
    slug::TemplateSlug,
    template::{ContentType, Template},
    AccountId, MailServerId, TemplateId,
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{corrupt, timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    schema::{automations, templates},
};

#[derive(Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = templates, check_for_backend(diesel::pg::Pg), treat_none_as_null = true)]
pub(super) struct TemplateRow {
    // Never in the update's SET: the row's key, and on Citus its distribution column,
    // which a statement may not set even to the value it has.
    #[diesel(skip_update)]
    account_id: Uuid,
    id: Uuid,
    name: String,
    slug: String,
    subject: String,
    content: String,
    text_content: Option<String>,
    content_type: String,
    from_name: Option<String>,
    from_email: Option<String>,
    cc: Option<String>,
    bcc: Option<String>,
    rcpt_name: Option<String>,
    reply_to: Option<String>,
    preferred_mail_server_id: Option<Uuid>,
    click_tracking: Option<bool>,
    open_tracking: Option<bool>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl TryFrom<TemplateRow> for Template {
    type Error = StoreError;

    fn try_from(row: TemplateRow) -> Result<Self, StoreError> {
        Ok(Self {
            id: TemplateId::from_uuid(row.id),
            name: row.name,
            slug: TemplateSlug::parse(&row.slug).map_err(|e| corrupt("templates.slug", e))?,
            subject: row.subject,
            content: row.content,
            text_content: row.text_content,
            content_type: ContentType::parse(&row.content_type)
                .ok_or_else(|| corrupt("templates.content_type", &row.content_type))?,
            from_name: row.from_name,
            from_email: row.from_email,
            cc: row.cc,
            bcc: row.bcc,
            rcpt_name: row.rcpt_name,
            reply_to: row.reply_to,
            preferred_mail_server: row.preferred_mail_server_id.map(MailServerId::from_uuid),
            click_tracking: row.click_tracking,
            open_tracking: row.open_tracking,
            created_at: timestamp(row.created_at),
            updated_at: timestamp(row.updated_at),
        })
    }
}

fn template_row(account: AccountId, t: &Template) -> TemplateRow {
    TemplateRow {
        account_id: account.as_uuid(),
        id: t.id.as_uuid(),
        name: t.name.clone(),
        slug: t.slug.as_str().to_owned(),
        subject: t.subject.clone(),
        content: t.content.clone(),
        text_content: t.text_content.clone(),
        content_type: t.content_type.as_str().to_owned(),
        from_name: t.from_name.clone(),
        from_email: t.from_email.clone(),
        cc: t.cc.clone(),
        bcc: t.bcc.clone(),
        rcpt_name: t.rcpt_name.clone(),
        reply_to: t.reply_to.clone(),
        preferred_mail_server_id: t.preferred_mail_server.map(|id| id.as_uuid()),
        click_tracking: t.click_tracking,
        open_tracking: t.open_tracking,
        created_at: t.created_at.as_datetime(),
        updated_at: t.updated_at.as_datetime(),
    }
}

/// A page offset as SQL wants it; offsets above `i64::MAX` are refused when parsed.
pub(crate) fn page_bounds(page: PageRequest) -> (i64, i64) {
    (
        i64::try_from(page.start).unwrap_or(i64::MAX),
        i64::from(page.limit),
    )
}

impl TemplateRepository for PgUnitOfWork<'_> {
    fn list_templates(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<Template>, StoreError> {
        let (offset, limit) = page_bounds(page);
        templates::table
            .filter(templates::account_id.eq(account.as_uuid()))
            .order((templates::created_at.asc(), templates::id.asc()))
            .offset(offset)
            .limit(limit)
            .select(TemplateRow::as_select())
            .load(self.conn)
            .map_err(store_error)?
            .into_iter()
            .map(Template::try_from)
            .collect()
    }

    fn count_templates(&mut self, account: AccountId) -> Result<u64, StoreError> {
        templates::table
            .filter(templates::account_id.eq(account.as_uuid()))
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn find_template(
        &mut self,
        account: AccountId,
        id: TemplateId,
    ) -> Result<Option<Template>, StoreError> {
        templates::table
            .find((account.as_uuid(), id.as_uuid()))
            .select(TemplateRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(Template::try_from)
            .transpose()
    }

    fn find_template_by_slug(
        &mut self,
        account: AccountId,
        slug: &str,
    ) -> Result<Option<Template>, StoreError> {
        templates::table
            .filter(templates::account_id.eq(account.as_uuid()))
            .filter(templates::slug.eq(slug))
            .select(TemplateRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(Template::try_from)
            .transpose()
    }

    fn insert_template(
        &mut self,
        account: AccountId,
        template: &Template,
    ) -> Result<(), StoreError> {
        diesel::insert_into(templates::table)
            .values(template_row(account, template))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn update_template(
        &mut self,
        account: AccountId,
        template: &Template,
    ) -> Result<(), StoreError> {
        diesel::update(templates::table.find((account.as_uuid(), template.id.as_uuid())))
            .set(template_row(account, template))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn delete_template(&mut self, account: AccountId, id: TemplateId) -> Result<bool, StoreError> {
        diesel::delete(templates::table.find((account.as_uuid(), id.as_uuid())))
            .execute(self.conn)
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn automations_sending(
        &mut self,
        account: AccountId,
        template: TemplateId,
    ) -> Result<Vec<String>, StoreError> {
        automations::table
            .filter(automations::account_id.eq(account.as_uuid()))
            .filter(automations::template_id.eq(template.as_uuid()))
            .order(automations::created_at.asc())
            .select(automations::name)
            .load(self.conn)
            .map_err(store_error)
    }
}
