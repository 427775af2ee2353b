use mailroom_domain::{branding::Branding, paging::PageRequest, AccountId, ContactId, TopicId};

use super::contact_of;
use crate::{
    ports::{in_transaction, UnitOfWork},
    AppError, Services,
};

/// The most topics the page lists (an account has a handful).
const MAX_TOPICS: u32 = 500;

/// What the unsubscribe page shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionPage {
    /// The account's name, as the sender the contact knows.
    pub account_name: String,
    /// The account's branding of the page.
    pub branding: Branding,
    /// The contact's address.
    pub email: String,
    /// Whether the contact is unsubscribed from everything.
    pub unsubscribed: bool,
    /// The account's topics, oldest first.
    pub topics: Vec<TopicChoice>,
}

/// One topic on the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicChoice {
    /// Id (the form's value).
    pub id: TopicId,
    /// Name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Whether the contact is unsubscribed from it.
    pub unsubscribed: bool,
}

/// The page for the contact the token names.
///
/// # Errors
/// [`AppError::NotFound`] for a token the server did not mint or a contact that no
/// longer exists; [`AppError`] when the store fails.
pub fn subscription_page(services: &Services, token: &str) -> Result<SubscriptionPage, AppError> {
    let (account, contact) = contact_of(services, token)?;
    in_transaction(services.db.as_ref(), |tx| load_page(tx, account, contact))
}

/// The page as stored now, in the caller's transaction.
pub(super) fn load_page(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    contact: ContactId,
) -> Result<SubscriptionPage, AppError> {
    let contact = tx
        .find_contact(account, contact)?
        .ok_or(AppError::NotFound)?;
    let account = tx.find_account(account)?.ok_or(AppError::NotFound)?;
    let topics = tx
        .list_topics(
            account.id,
            PageRequest {
                start: 0,
                limit: MAX_TOPICS,
            },
        )?
        .into_iter()
        .map(|topic| TopicChoice {
            unsubscribed: contact.topic_unsubscriptions.contains(&topic.id),
            id: topic.id,
            name: topic.name,
            description: topic.description,
        })
        .collect();
    Ok(SubscriptionPage {
        account_name: account.name.as_str().to_owned(),
        branding: account.branding,
        email: contact.email,
        unsubscribed: contact.unsubscribed_at.is_some(),
        topics,
    })
}
