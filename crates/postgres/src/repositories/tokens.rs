use diesel::prelude::*;
use mailroom_app::{
    ports::{NewTokenRecord, TokenRecord, TokenRepository},
    StoreError,
};
use mailroom_domain::{
    token::{TokenHash, TokenScope},
    AccountId, Timestamp, TokenId, UserId,
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{timestamp, PgUnitOfWork};
use crate::{error::store_error, schema::tokens};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = tokens, check_for_backend(diesel::pg::Pg))]
struct TokenRow {
    id: Uuid,
    user_id: Uuid,
    name: String,
    token_hash: Vec<u8>,
    created_at: OffsetDateTime,
    expires_at: Option<OffsetDateTime>,
    last_used_at: Option<OffsetDateTime>,
    revoked_at: Option<OffsetDateTime>,
    scope: String,
    account_ids: Option<Vec<Uuid>>,
}

impl From<TokenRow> for TokenRecord {
    fn from(row: TokenRow) -> Self {
        Self {
            id: TokenId::from_uuid(row.id),
            user_id: UserId::from_uuid(row.user_id),
            name: row.name,
            created_at: timestamp(row.created_at),
            expires_at: row.expires_at.map(timestamp),
            last_used_at: row.last_used_at.map(timestamp),
            revoked_at: row.revoked_at.map(timestamp),
            scope: TokenScope::from_stored(&row.scope),
            account_ids: row
                .account_ids
                .map(|ids| ids.into_iter().map(AccountId::from_uuid).collect()),
        }
    }
}

impl TokenRepository for PgUnitOfWork<'_> {
    fn insert_token(&mut self, token: &NewTokenRecord) -> Result<(), StoreError> {
        let record = &token.record;
        diesel::insert_into(tokens::table)
            .values(TokenRow {
                id: record.id.as_uuid(),
                user_id: record.user_id.as_uuid(),
                name: record.name.clone(),
                token_hash: token.hash.0.to_vec(),
                created_at: record.created_at.as_datetime(),
                expires_at: record.expires_at.map(|t| t.as_datetime()),
                last_used_at: None,
                revoked_at: None,
                scope: record.scope.as_str().to_owned(),
                account_ids: record
                    .account_ids
                    .as_ref()
                    .map(|ids| ids.iter().map(|id| id.as_uuid()).collect()),
            })
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn find_token_by_hash(&mut self, hash: &TokenHash) -> Result<Option<TokenRecord>, StoreError> {
        tokens::table
            .filter(tokens::token_hash.eq(&hash.0[..]))
            .select(TokenRow::as_select())
            .first(self.conn)
            .optional()
            .map(|row| row.map(TokenRecord::from))
            .map_err(store_error)
    }

    fn list_active_tokens(&mut self, user: UserId) -> Result<Vec<TokenRecord>, StoreError> {
        tokens::table
            .filter(tokens::user_id.eq(user.as_uuid()))
            .filter(tokens::revoked_at.is_null())
            .order((tokens::created_at.asc(), tokens::id.asc()))
            .select(TokenRow::as_select())
            .load(self.conn)
            .map(|rows| rows.into_iter().map(TokenRecord::from).collect())
            .map_err(store_error)
    }

    fn touch_token(
        &mut self,
        id: TokenId,
        now: Timestamp,
        not_after: Timestamp,
    ) -> Result<(), StoreError> {
        diesel::update(tokens::table)
            .filter(tokens::id.eq(id.as_uuid()))
            .filter(
                tokens::last_used_at
                    .is_null()
                    .or(tokens::last_used_at.le(not_after.as_datetime())),
            )
            .set(tokens::last_used_at.eq(now.as_datetime()))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn revoke_token(
        &mut self,
        user: UserId,
        id: TokenId,
        now: Timestamp,
    ) -> Result<Option<TokenRecord>, StoreError> {
        diesel::update(tokens::table)
            .filter(tokens::id.eq(id.as_uuid()))
            .filter(tokens::user_id.eq(user.as_uuid()))
            .filter(tokens::revoked_at.is_null())
            .set(tokens::revoked_at.eq(now.as_datetime()))
            .returning(TokenRow::as_returning())
            .get_result(self.conn)
            .optional()
            .map(|row| row.map(TokenRecord::from))
            .map_err(store_error)
    }
}
