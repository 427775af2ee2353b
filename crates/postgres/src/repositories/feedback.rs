//! Feedback intake: the message lookups by `Message-ID` and by recipient (indexed by
//! migration 000008), and the guarded complaint and late-bounce writes.

use diesel::prelude::*;
use mailroom_app::{
    ports::{FeedbackRepository, MessageRepository},
    StoreError,
};
use mailroom_domain::{
    email::EmailAddress,
    message::{Message, MessageStatus},
    AccountId, ContactId, MessageId, Timestamp,
};
use uuid::Uuid;

use super::contacts::{record_latest_activity, set_contact_mark, ContactMark, LatestActivity};
use super::{lower, PgUnitOfWork};
use crate::{
    error::store_error,
    prepared_sql::prepared_sql,
    schema::{contacts, messages},
    upkeep::{add_to_counters, AccountCounters},
};

impl PgUnitOfWork<'_> {
    fn message_by_id(
        &mut self,
        account: AccountId,
        id: Option<Uuid>,
    ) -> Result<Option<Message>, StoreError> {
        match id {
            Some(id) => self.find_message(account, MessageId::from_uuid(id)),
            None => Ok(None),
        }
    }
}

impl FeedbackRepository for PgUnitOfWork<'_> {
    fn find_latest_message_to(
        &mut self,
        account: AccountId,
        email: &EmailAddress,
    ) -> Result<Option<Message>, StoreError> {
        let id = messages::table
            .filter(messages::account_id.eq(account.as_uuid()))
            .filter(lower(messages::email).eq(email.normalized()))
            .order((messages::created_at.desc(), messages::id.desc()))
            .select(messages::id)
            .first::<Uuid>(self.conn)
            .optional()
            .map_err(store_error)?;
        self.message_by_id(account, id)
    }

    fn find_contact_id_by_email(
        &mut self,
        account: AccountId,
        email: &EmailAddress,
    ) -> Result<Option<ContactId>, StoreError> {
        contacts::table
            .filter(contacts::account_id.eq(account.as_uuid()))
            .filter(contacts::email_lower.eq(email.normalized()))
            .select(contacts::id)
            .first::<Uuid>(self.conn)
            .optional()
            .map(|id| id.map(ContactId::from_uuid))
            .map_err(store_error)
    }

    fn mark_contact_complained(
        &mut self,
        account: AccountId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        set_contact_mark(self.conn, account, contact, ContactMark::Complained, now)
    }

    fn mark_sent_message_bounced(
        &mut self,
        account: AccountId,
        message: MessageId,
        reply: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let bounced = diesel::update(
            messages::table
                .find((account.as_uuid(), message.as_uuid()))
                .filter(messages::status.eq(MessageStatus::Sent.as_str())),
        )
        .set((
            messages::status.eq(MessageStatus::Bounced.as_str()),
            messages::last_reply.eq(Some(reply)),
            messages::updated_at.eq(now.as_datetime()),
        ))
        .returning((
            messages::announcement_id,
            messages::contact_id,
            messages::test,
        ))
        .get_result::<(Option<Uuid>, Uuid, bool)>(self.conn)
        .optional()
        .map_err(store_error)?;
        let Some((announcement, contact, test)) = bounced else {
            return Ok(false);
        };
        // The contact's latest bounce, which engagement conditions on any message read.
        // A test send is not the contact's message.
        if !test {
            record_latest_activity(self.conn, account, contact, LatestActivity::Bounced, now)?;
        }
        // The announcement counters: `sent` became `bounced`.
        if let Some(announcement) = announcement {
            let mut counters = AccountCounters::default();
            counters.moved(
                announcement,
                Some(MessageStatus::Sent),
                Some(MessageStatus::Bounced),
            );
            add_to_counters(self.conn, account.as_uuid(), &counters)?;
        }
        Ok(true)
    }

    fn note_copy_refusal(
        &mut self,
        account: AccountId,
        message: MessageId,
        note: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        // Guarded by the note itself: a repeat of the report finds it and writes nothing.
        // Bounded: a last reply of 8,000 characters takes no more notes.
        prepared_sql(
            "UPDATE messages \
             SET last_reply = CASE WHEN last_reply IS NULL OR last_reply = '' THEN $3 \
                                   ELSE last_reply || '; ' || $3 END, \
                 updated_at = $4 \
             WHERE account_id = $1 AND id = $2 \
               AND strpos(coalesce(last_reply, ''), $3) = 0 \
               AND length(coalesce(last_reply, '')) < 8000",
        )
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .bind::<diesel::sql_types::Uuid, _>(message.as_uuid())
        .bind::<diesel::sql_types::Text, _>(note)
        .bind::<diesel::sql_types::Timestamptz, _>(now.as_datetime())
        .execute(self.conn)
        .map(|n| n > 0)
        .map_err(store_error)
    }
}
