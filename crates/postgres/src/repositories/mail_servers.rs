use diesel::prelude::*;
use mailroom_app::{
    ports::{MailServerRecord, MailServerRepository, SealedSecret},
    StoreError,
};
use mailroom_domain::{
    mail_server::{MailHost, MailServer, Unhealthy},
    paging::PageRequest,
    AccountId, MailServerId, Timestamp,
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{corrupt, templates::page_bounds, timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    schema::{mail_servers, templates},
};

#[derive(Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = mail_servers, check_for_backend(diesel::pg::Pg), treat_none_as_null = true)]
struct MailServerRow {
    // Never in the update's SET: the row's key, and on Citus its distribution column,
    // which a statement may not set even to the value it has.
    #[diesel(skip_update)]
    account_id: Uuid,
    id: Uuid,
    service_type: String,
    host: String,
    port: i32,
    secure: bool,
    require_tls: bool,
    allow_insecure_tls: bool,
    username: String,
    password: Vec<u8>,
    default_from_email: String,
    default_from_name: String,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
    // Written as NULL by every insert and update (`treat_none_as_null`): a save clears
    // the health mark.
    unhealthy_since: Option<OffsetDateTime>,
    last_error: Option<String>,
}

impl TryFrom<MailServerRow> for MailServerRecord {
    type Error = StoreError;

    fn try_from(row: MailServerRow) -> Result<Self, StoreError> {
        Ok(Self {
            server: MailServer {
                id: MailServerId::from_uuid(row.id),
                service_type: row.service_type,
                host: MailHost::parse(&row.host).map_err(|e| corrupt("mail_servers.host", e))?,
                port: u16::try_from(row.port).map_err(|e| corrupt("mail_servers.port", e))?,
                secure: row.secure,
                require_tls: row.require_tls,
                allow_insecure_tls: row.allow_insecure_tls,
                user: row.username,
                default_from_email: row.default_from_email,
                default_from_name: row.default_from_name,
                created_at: timestamp(row.created_at),
                updated_at: timestamp(row.updated_at),
                unhealthy: match (row.unhealthy_since, row.last_error) {
                    (Some(since), Some(last_error)) => Some(Unhealthy {
                        since: timestamp(since),
                        last_error,
                    }),
                    _ => None,
                },
            },
            password: SealedSecret(row.password),
        })
    }
}

fn mail_server_row(account: AccountId, record: &MailServerRecord) -> MailServerRow {
    let server = &record.server;
    MailServerRow {
        account_id: account.as_uuid(),
        id: server.id.as_uuid(),
        service_type: server.service_type.clone(),
        host: server.host.as_str().to_owned(),
        port: i32::from(server.port),
        secure: server.secure,
        require_tls: server.require_tls,
        allow_insecure_tls: server.allow_insecure_tls,
        username: server.user.clone(),
        password: record.password.0.clone(),
        default_from_email: server.default_from_email.clone(),
        default_from_name: server.default_from_name.clone(),
        created_at: server.created_at.as_datetime(),
        updated_at: server.updated_at.as_datetime(),
        unhealthy_since: server.unhealthy.as_ref().map(|u| u.since.as_datetime()),
        last_error: server.unhealthy.as_ref().map(|u| u.last_error.clone()),
    }
}

impl MailServerRepository for PgUnitOfWork<'_> {
    fn list_mail_servers(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<MailServerRecord>, StoreError> {
        let (offset, limit) = page_bounds(page);
        mail_servers::table
            .filter(mail_servers::account_id.eq(account.as_uuid()))
            .order((mail_servers::created_at.asc(), mail_servers::id.asc()))
            .offset(offset)
            .limit(limit)
            .select(MailServerRow::as_select())
            .load(self.conn)
            .map_err(store_error)?
            .into_iter()
            .map(MailServerRecord::try_from)
            .collect()
    }

    fn count_mail_servers(&mut self, account: AccountId) -> Result<u64, StoreError> {
        mail_servers::table
            .filter(mail_servers::account_id.eq(account.as_uuid()))
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn find_mail_server(
        &mut self,
        account: AccountId,
        id: MailServerId,
    ) -> Result<Option<MailServerRecord>, StoreError> {
        mail_servers::table
            .find((account.as_uuid(), id.as_uuid()))
            .select(MailServerRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(MailServerRecord::try_from)
            .transpose()
    }

    fn insert_mail_server(
        &mut self,
        account: AccountId,
        record: &MailServerRecord,
    ) -> Result<(), StoreError> {
        diesel::insert_into(mail_servers::table)
            .values(mail_server_row(account, record))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn update_mail_server(
        &mut self,
        account: AccountId,
        record: &MailServerRecord,
    ) -> Result<bool, StoreError> {
        diesel::update(mail_servers::table.find((account.as_uuid(), record.server.id.as_uuid())))
            .set(mail_server_row(account, record))
            .execute(self.conn)
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn mark_mail_server_unhealthy(
        &mut self,
        account: AccountId,
        id: MailServerId,
        version: Timestamp,
        now: Timestamp,
        error: &str,
    ) -> Result<Option<Timestamp>, StoreError> {
        use diesel::dsl::sql;
        use diesel::sql_types::{Nullable, Timestamptz};
        diesel::update(
            mail_servers::table
                .find((account.as_uuid(), id.as_uuid()))
                .filter(mail_servers::updated_at.eq(version.as_datetime())),
        )
        .set((
            mail_servers::unhealthy_since.eq(sql::<Nullable<Timestamptz>>(
                "coalesce(unhealthy_since, ",
            )
            .bind::<Timestamptz, _>(now.as_datetime())
            .sql(")")),
            mail_servers::last_error.eq(Some(error)),
        ))
        .returning(mail_servers::unhealthy_since)
        .get_result::<Option<OffsetDateTime>>(self.conn)
        .optional()
        .map(|since| since.flatten().map(timestamp))
        .map_err(store_error)
    }

    fn mark_mail_server_healthy(
        &mut self,
        account: AccountId,
        id: MailServerId,
    ) -> Result<bool, StoreError> {
        diesel::update(
            mail_servers::table
                .find((account.as_uuid(), id.as_uuid()))
                .filter(mail_servers::unhealthy_since.is_not_null()),
        )
        .set((
            mail_servers::unhealthy_since.eq(None::<OffsetDateTime>),
            mail_servers::last_error.eq(None::<String>),
        ))
        .execute(self.conn)
        .map(|n| n > 0)
        .map_err(store_error)
    }

    fn delete_mail_server(
        &mut self,
        account: AccountId,
        id: MailServerId,
    ) -> Result<bool, StoreError> {
        diesel::delete(mail_servers::table.find((account.as_uuid(), id.as_uuid())))
            .execute(self.conn)
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn templates_preferring(
        &mut self,
        account: AccountId,
        server: MailServerId,
    ) -> Result<Vec<String>, StoreError> {
        templates::table
            .filter(templates::account_id.eq(account.as_uuid()))
            .filter(templates::preferred_mail_server_id.eq(server.as_uuid()))
            .order(templates::slug.asc())
            .select(templates::slug)
            .load(self.conn)
            .map_err(store_error)
    }
}
