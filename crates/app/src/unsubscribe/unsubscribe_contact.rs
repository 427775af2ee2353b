use mailroom_domain::{
    message::StatsCounter,
    suppression::{SuppressionReason, SuppressionSource},
    webhook_event::{ContactChange, ContactNotice},
    TopicId,
};

use super::{contact_of, page::load_page, SubscriptionPage};
use crate::{
    messages::count,
    ports::in_transaction,
    suppressions::{suppress, Listing},
    webhook_events::queue_webhook_event,
    AppError, Services,
};

/// What a post to the unsubscribe page asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnsubscribeChoice {
    /// Unsubscribe from everything (the page's button, and the RFC 8058 one-click post).
    Everything,
    /// Unsubscribe from these topics of the account (at least one).
    Topics(Vec<TopicId>),
}

/// What a post changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsubscribed {
    /// How many unsubscriptions were new (0 for a repeat).
    pub changes: usize,
    /// The page after the change.
    pub page: SubscriptionPage,
}

/// Unsubscribes the contact the token names, in one transaction. Each new
/// unsubscription (from everything, or from one topic) sets its mark, counts
/// `unsubscribed` once and queues `contact.unsubscribed` (with `topicId` for a topic);
/// one that already holds changes and counts nothing, so a post is safe to repeat.
///
/// # Errors
/// [`AppError::NotFound`] for a token the server did not mint or a contact that no
/// longer exists; [`AppError::BadRequest`] for a topic that is not the account's or an
/// empty topic choice; [`AppError`] when the store fails.
pub fn unsubscribe(
    services: &Services,
    token: &str,
    choice: &UnsubscribeChoice,
) -> Result<Unsubscribed, AppError> {
    let (account, contact_id) = contact_of(services, token)?;
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        let before = load_page(tx, account, contact_id)?;
        let mut changes = Vec::new();
        match choice {
            UnsubscribeChoice::Everything => {
                if tx.unsubscribe_contact(account, contact_id, now)? {
                    changes.push(None);
                }
                // Listed whether or not the mark is new: a mark made before the list
                // existed gets its entry here.
                suppress(
                    tx,
                    services,
                    account,
                    &Listing {
                        email: &before.email,
                        reason: SuppressionReason::Unsubscribe,
                        source: SuppressionSource::UnsubscribeLink,
                        detail: None,
                        at: now,
                    },
                )?;
            }
            UnsubscribeChoice::Topics(topics) => {
                if topics.is_empty() {
                    return Err(AppError::BadRequest("choose at least one topic".into()));
                }
                // The page lists each topic once: a form naming more than the account
                // has is not the page's, and each topic is written once.
                if topics.len() > before.topics.len() {
                    return Err(AppError::BadRequest(format!(
                        "the form names {} topics; the account has {}",
                        topics.len(),
                        before.topics.len()
                    )));
                }
                let mut chosen = topics.clone();
                chosen.sort_unstable();
                chosen.dedup();
                if let Some(unknown) = chosen
                    .iter()
                    .find(|topic| !before.topics.iter().any(|known| known.id == **topic))
                {
                    return Err(AppError::BadRequest(format!("unknown topic {unknown}")));
                }
                let added =
                    tx.unsubscribe_contact_from_topics(account, contact_id, &chosen, now)?;
                // In id order (topic ids are time-ordered: the order they were created).
                changes.extend(
                    chosen
                        .iter()
                        .filter(|topic| added.contains(topic))
                        .map(|topic| Some(*topic)),
                );
            }
        }
        for topic_id in &changes {
            count(tx, account, now, StatsCounter::Unsubscribed)?;
            queue_webhook_event(
                tx,
                services,
                &ContactNotice {
                    account_id: account,
                    contact_id,
                    email: before.email.clone(),
                    occurred_at: now,
                    change: ContactChange::Unsubscribed {
                        topic_id: *topic_id,
                    },
                },
            )?;
        }
        let page = if changes.is_empty() {
            before
        } else {
            load_page(tx, account, contact_id)?
        };
        Ok(Unsubscribed {
            changes: changes.len(),
            page,
        })
    })
}
