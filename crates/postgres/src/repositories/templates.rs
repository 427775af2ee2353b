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
use crate::{error::store_error, schema::templates};

#[derive(Queryable, Selectable)]
#[diesel(table_name = templates, check_for_backend(diesel::pg::Pg))]
struct TemplateRow {
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

/// A page offset as SQL wants it; offsets were clamped to `i64::MAX` when parsed.
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
}
