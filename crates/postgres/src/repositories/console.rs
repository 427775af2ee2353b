use diesel::prelude::*;
use mailroom_app::{
    ports::{ConsoleRepository, ConsoleSessionRecord},
    StoreError,
};
use mailroom_domain::{
    console::ConsoleSecretHash, token::TokenScope, AccountId, ConsoleSessionId, Timestamp, TokenId,
    UserId, Uuid,
};
use time::OffsetDateTime;

use super::{timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    schema::{console_login_links, console_sessions, tokens},
};

#[derive(Queryable, Selectable)]
#[diesel(table_name = console_sessions, check_for_backend(diesel::pg::Pg))]
struct SessionRow {
    id: Uuid,
    user_id: Uuid,
    csrf_token: String,
    token_id: Option<Uuid>,
    scope: String,
    account_ids: Option<Vec<Uuid>>,
    user_agent: String,
    created_at: OffsetDateTime,
    expires_at: OffsetDateTime,
    revoked_at: Option<OffsetDateTime>,
}

impl From<SessionRow> for ConsoleSessionRecord {
    fn from(row: SessionRow) -> Self {
        Self {
            id: ConsoleSessionId::from_uuid(row.id),
            user_id: UserId::from_uuid(row.user_id),
            csrf_token: row.csrf_token,
            token_id: row.token_id.map(TokenId::from_uuid),
            scope: TokenScope::from_stored(&row.scope),
            account_ids: row
                .account_ids
                .map(|ids| ids.into_iter().map(AccountId::from_uuid).collect()),
            user_agent: row.user_agent,
            created_at: timestamp(row.created_at),
            expires_at: timestamp(row.expires_at),
            revoked_at: row.revoked_at.map(timestamp),
        }
    }
}

impl ConsoleRepository for PgUnitOfWork<'_> {
    fn insert_console_session(
        &mut self,
        session: &ConsoleSessionRecord,
        secret_hash: &ConsoleSecretHash,
    ) -> Result<(), StoreError> {
        diesel::insert_into(console_sessions::table)
            .values((
                console_sessions::id.eq(session.id.as_uuid()),
                console_sessions::user_id.eq(session.user_id.as_uuid()),
                console_sessions::secret_hash.eq(&secret_hash.0[..]),
                console_sessions::csrf_token.eq(&session.csrf_token),
                console_sessions::token_id.eq(session.token_id.map(|id| id.as_uuid())),
                console_sessions::scope.eq(session.scope.as_str()),
                console_sessions::account_ids.eq(session
                    .account_ids
                    .as_ref()
                    .map(|ids| ids.iter().map(|id| id.as_uuid()).collect::<Vec<_>>())),
                console_sessions::user_agent.eq(&session.user_agent),
                console_sessions::created_at.eq(session.created_at.as_datetime()),
                console_sessions::expires_at.eq(session.expires_at.as_datetime()),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn find_live_console_session(
        &mut self,
        secret_hash: &ConsoleSecretHash,
        now: Timestamp,
    ) -> Result<Option<ConsoleSessionRecord>, StoreError> {
        let now = now.as_datetime();
        // A session opened with a token lives only as long as the token does.
        let token_alive = console_sessions::token_id.is_null().or(diesel::dsl::exists(
            tokens::table
                .filter(tokens::id.nullable().eq(console_sessions::token_id))
                .filter(tokens::revoked_at.is_null())
                .filter(tokens::expires_at.is_null().or(tokens::expires_at.gt(now))),
        ));
        console_sessions::table
            .filter(console_sessions::secret_hash.eq(&secret_hash.0[..]))
            .filter(console_sessions::revoked_at.is_null())
            .filter(console_sessions::expires_at.gt(now))
            .filter(token_alive)
            .select(SessionRow::as_select())
            .first(self.conn)
            .optional()
            .map(|row| row.map(ConsoleSessionRecord::from))
            .map_err(store_error)
    }

    fn list_live_console_sessions(
        &mut self,
        user: UserId,
        now: Timestamp,
    ) -> Result<Vec<ConsoleSessionRecord>, StoreError> {
        console_sessions::table
            .filter(console_sessions::user_id.eq(user.as_uuid()))
            .filter(console_sessions::revoked_at.is_null())
            .filter(console_sessions::expires_at.gt(now.as_datetime()))
            .order((
                console_sessions::created_at.desc(),
                console_sessions::id.desc(),
            ))
            // A user signs in a few times a day for at most a session's lifetime; the
            // bound keeps the page small whatever a script does.
            .limit(200)
            .select(SessionRow::as_select())
            .load(self.conn)
            .map(|rows| rows.into_iter().map(ConsoleSessionRecord::from).collect())
            .map_err(store_error)
    }

    fn revoke_console_session(
        &mut self,
        user: UserId,
        id: ConsoleSessionId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        diesel::update(console_sessions::table)
            .filter(console_sessions::id.eq(id.as_uuid()))
            .filter(console_sessions::user_id.eq(user.as_uuid()))
            .filter(console_sessions::revoked_at.is_null())
            .filter(console_sessions::expires_at.gt(now.as_datetime()))
            .set(console_sessions::revoked_at.eq(now.as_datetime()))
            .execute(self.conn)
            .map(|changed| changed == 1)
            .map_err(store_error)
    }

    fn insert_login_link(
        &mut self,
        id: Uuid,
        user: UserId,
        secret_hash: &ConsoleSecretHash,
        created_at: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        diesel::insert_into(console_login_links::table)
            .values((
                console_login_links::id.eq(id),
                console_login_links::user_id.eq(user.as_uuid()),
                console_login_links::secret_hash.eq(&secret_hash.0[..]),
                console_login_links::created_at.eq(created_at.as_datetime()),
                console_login_links::expires_at.eq(expires_at.as_datetime()),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn use_login_link(
        &mut self,
        secret_hash: &ConsoleSecretHash,
        now: Timestamp,
    ) -> Result<Option<UserId>, StoreError> {
        diesel::update(console_login_links::table)
            .filter(console_login_links::secret_hash.eq(&secret_hash.0[..]))
            .filter(console_login_links::used_at.is_null())
            .filter(console_login_links::expires_at.gt(now.as_datetime()))
            .set(console_login_links::used_at.eq(now.as_datetime()))
            .returning(console_login_links::user_id)
            .get_result::<Uuid>(self.conn)
            .optional()
            .map(|user| user.map(UserId::from_uuid))
            .map_err(store_error)
    }
}
