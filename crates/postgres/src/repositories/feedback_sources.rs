//! Feedback sources and the Mailgun tokens already seen.

use diesel::prelude::*;
use mailroom_app::{
    ports::{FeedbackSourceRecord, FeedbackSourceRepository, SealedSecret},
    StoreError,
};
use mailroom_domain::{feedback_source::Provider, AccountId, FeedbackSourceId, Timestamp};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{corrupt, timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    schema::{feedback_source_tokens, feedback_sources},
};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = feedback_sources, check_for_backend(diesel::pg::Pg))]
struct SourceRow {
    account_id: Uuid,
    id: Uuid,
    provider: String,
    topic_arns: Vec<String>,
    signing_key: Option<Vec<u8>>,
    public_key: Option<String>,
    secret_hash: Option<Vec<u8>>,
    created_at: OffsetDateTime,
    last_event_at: Option<OffsetDateTime>,
    events_recorded: i64,
    events_ignored: i64,
}

impl TryFrom<SourceRow> for FeedbackSourceRecord {
    type Error = StoreError;

    fn try_from(row: SourceRow) -> Result<Self, StoreError> {
        let provider = Provider::parse(&row.provider)
            .ok_or_else(|| corrupt("feedback_sources.provider", &row.provider))?;
        let secret_hash = match row.secret_hash {
            Some(hash) => Some(
                <[u8; 32]>::try_from(hash.as_slice())
                    .map_err(|error| corrupt("feedback_sources.secret_hash", error))?,
            ),
            None => None,
        };
        Ok(Self {
            account_id: AccountId::from_uuid(row.account_id),
            id: FeedbackSourceId::from_uuid(row.id),
            provider,
            topic_arns: row.topic_arns,
            signing_key: row.signing_key.map(SealedSecret),
            public_key: row.public_key,
            secret_hash,
            created_at: timestamp(row.created_at),
            last_event_at: row.last_event_at.map(timestamp),
            events_recorded: row.events_recorded,
            events_ignored: row.events_ignored,
        })
    }
}

impl FeedbackSourceRepository for PgUnitOfWork<'_> {
    fn insert_feedback_source(&mut self, source: &FeedbackSourceRecord) -> Result<(), StoreError> {
        diesel::insert_into(feedback_sources::table)
            .values(SourceRow {
                account_id: source.account_id.as_uuid(),
                id: source.id.as_uuid(),
                provider: source.provider.as_str().to_owned(),
                topic_arns: source.topic_arns.clone(),
                signing_key: source.signing_key.as_ref().map(|sealed| sealed.0.clone()),
                public_key: source.public_key.clone(),
                secret_hash: source.secret_hash.map(|hash| hash.to_vec()),
                created_at: source.created_at.as_datetime(),
                last_event_at: source.last_event_at.map(|at| at.as_datetime()),
                events_recorded: source.events_recorded,
                events_ignored: source.events_ignored,
            })
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn find_feedback_source(
        &mut self,
        account: AccountId,
        id: FeedbackSourceId,
    ) -> Result<Option<FeedbackSourceRecord>, StoreError> {
        feedback_sources::table
            .find((account.as_uuid(), id.as_uuid()))
            .select(SourceRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(FeedbackSourceRecord::try_from)
            .transpose()
    }

    fn list_feedback_sources(
        &mut self,
        account: AccountId,
    ) -> Result<Vec<FeedbackSourceRecord>, StoreError> {
        feedback_sources::table
            .filter(feedback_sources::account_id.eq(account.as_uuid()))
            .order((
                feedback_sources::created_at.asc(),
                feedback_sources::id.asc(),
            ))
            .select(SourceRow::as_select())
            .load(self.conn)
            .map_err(store_error)?
            .into_iter()
            .map(FeedbackSourceRecord::try_from)
            .collect()
    }

    fn delete_feedback_source(
        &mut self,
        account: AccountId,
        id: FeedbackSourceId,
    ) -> Result<bool, StoreError> {
        diesel::delete(feedback_sources::table.find((account.as_uuid(), id.as_uuid())))
            .execute(self.conn)
            .map(|deleted| deleted == 1)
            .map_err(store_error)
    }

    fn count_feedback_source_events(
        &mut self,
        account: AccountId,
        id: FeedbackSourceId,
        recorded: i64,
        ignored: i64,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        diesel::update(feedback_sources::table.find((account.as_uuid(), id.as_uuid())))
            .set((
                feedback_sources::events_recorded.eq(feedback_sources::events_recorded + recorded),
                feedback_sources::events_ignored.eq(feedback_sources::events_ignored + ignored),
                feedback_sources::last_event_at.eq(Some(at.as_datetime())),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn feedback_token_seen(
        &mut self,
        account: AccountId,
        id: FeedbackSourceId,
        token: &str,
    ) -> Result<bool, StoreError> {
        diesel::select(diesel::dsl::exists(feedback_source_tokens::table.find((
            account.as_uuid(),
            id.as_uuid(),
            token,
        ))))
        .get_result(self.conn)
        .map_err(store_error)
    }

    fn remember_feedback_token(
        &mut self,
        account: AccountId,
        id: FeedbackSourceId,
        token: &str,
        at: Timestamp,
        forget_before: Timestamp,
    ) -> Result<(), StoreError> {
        diesel::delete(
            feedback_source_tokens::table
                .filter(feedback_source_tokens::account_id.eq(account.as_uuid()))
                .filter(feedback_source_tokens::source_id.eq(id.as_uuid()))
                .filter(feedback_source_tokens::seen_at.lt(forget_before.as_datetime())),
        )
        .execute(self.conn)
        .map_err(store_error)?;
        diesel::insert_into(feedback_source_tokens::table)
            .values((
                feedback_source_tokens::account_id.eq(account.as_uuid()),
                feedback_source_tokens::source_id.eq(id.as_uuid()),
                feedback_source_tokens::token.eq(token),
                feedback_source_tokens::seen_at.eq(at.as_datetime()),
            ))
            .on_conflict_do_nothing()
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }
}
