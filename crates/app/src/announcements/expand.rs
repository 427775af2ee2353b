use mailroom_domain::{
    announcement::Announcement,
    condition::{parse_conditions, Segment},
    message::message_id_domain,
    AccountId, AnnouncementId, MessageId,
};

use crate::{
    contacts::AccountAttributeTypes,
    messages::outbox::sender_domain,
    ports::{in_transaction, AudienceBatch, UnitOfWork},
    AppError, Services,
};

/// What one expansion step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpansionBatch {
    /// The account of the announcement.
    pub account: AccountId,
    /// The announcement expanded.
    pub announcement: AnnouncementId,
    /// Contacts of the audience read in this batch.
    pub contacts: usize,
    /// Messages queued by it (fewer than `contacts` only when a batch is repeated after a
    /// crash and found some already queued).
    pub queued: u64,
    /// Whether the audience's end was reached (or the announcement failed).
    pub finished: bool,
}

/// One batch of the oldest running announcement that still has audience to expand (any
/// account), or else of a scheduled one whose `sendAt` has come (it starts now), in one
/// transaction: queues a message for each of up to `batch_size`
/// contacts of its audience after `lastSampledContactId` in id order, in one
/// `INSERT … SELECT` (the audience compiled to SQL as the search does; a unique key
/// leaves out any contact that already has one), and moves `lastSampledContactId` to the
/// last contact the statement reached. A crash
/// loses at most the uncommitted batch, which the next run repeats. `None` when no
/// announcement needs expanding or another worker holds the only one.
///
/// The audience: contacts created until the announcement was, matching every condition,
/// minus those unsubscribed from its topic, minus those unsubscribed from everything
/// unless `includeUnsubscribed`. Hard-bounced and complained contacts are queued too and
/// the delivery worker records them `skipped`, so the log shows why they got nothing.
///
/// # Errors
/// [`AppError`] when the store fails; nothing of the batch is kept then.
pub fn expand_next_batch(
    services: &Services,
    batch_size: u32,
) -> Result<Option<ExpansionBatch>, AppError> {
    let batch_size = batch_size.max(1);
    let batch = in_transaction(services.db.as_ref(), |tx| {
        let Some((account, announcement)) = tx.lock_next_expansion(services.clock.now())? else {
            return Ok(None);
        };
        expand_batch(tx, services, account, &announcement, batch_size).map(Some)
    })?;
    if batch.as_ref().is_some_and(|batch| batch.queued > 0) {
        services.queue_wakeup.messages_queued();
    }
    Ok(batch)
}

fn expand_batch(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
    announcement: &Announcement,
    batch_size: u32,
) -> Result<ExpansionBatch, AppError> {
    let now = services.clock.now();
    let failed = |tx: &mut dyn UnitOfWork, reason: &str| {
        tx.fail_announcement(account, announcement.id, reason, now)?;
        Ok(ExpansionBatch {
            account,
            announcement: announcement.id,
            contacts: 0,
            queued: 0,
            finished: true,
        })
    };
    let types = AccountAttributeTypes::load(tx, account)?;
    // Engagement windows end where the audience does (the creation, or the scheduled
    // start): every batch, however late, reads the same window.
    let conditions = match parse_conditions(
        &announcement.attributes,
        &types,
        announcement.audience_until(),
    ) {
        Ok(conditions) => conditions,
        Err(errors) => return failed(tx, &format!("its conditions no longer apply: {errors}")),
    };
    let Some(template) = tx.find_template(account, announcement.template_id)? else {
        return failed(tx, "its template was deleted");
    };
    let segment = Segment {
        conditions,
        include_unsubscribed: announcement.include_unsubscribed,
        topic: announcement.topic_id,
    };
    let domain = sender_domain(tx, account, &template)?;
    // The ids are made here, like every message id (UUIDv7 from the service's source), and
    // the store takes one per contact it queues.
    let message_ids: Vec<MessageId> = (0..batch_size)
        .map(|_| MessageId::from_uuid(services.ids.next_uuid()))
        .collect();
    let batch = tx.queue_audience_batch(&AudienceBatch {
        account,
        announcement: announcement.id,
        segment: &segment,
        created_until: announcement.audience_until(),
        after: announcement.last_sampled_contact_id,
        message_ids: &message_ids,
        template: template.id,
        message_id_domain: message_id_domain(&domain),
        now,
    })?;
    let finished = batch.contacts < u64::from(batch_size);
    let last = batch.last.or(announcement.last_sampled_contact_id);
    tx.record_expansion(
        account,
        announcement.id,
        last,
        batch.queued,
        finished.then_some(now),
        now,
    )?;
    Ok(ExpansionBatch {
        account,
        announcement: announcement.id,
        contacts: usize::try_from(batch.contacts).unwrap_or(usize::MAX),
        queued: batch.queued,
        finished,
    })
}

/// Marks `completed` every running announcement whose audience is expanded and whose
/// messages all have a final state; returns how many.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn complete_finished(services: &Services) -> Result<u64, AppError> {
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.complete_finished_announcements(now)?)
    })
}
