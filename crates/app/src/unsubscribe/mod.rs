//! The unsubscribe page behind `/u/{token}` (docs/design.md#8-delivery, Unsubscribe): what it shows
//! ([`subscription_page`]) and what a post does ([`unsubscribe`]). The token alone
//! identifies the account, the contact and the message (see
//! [`LinkToken`](crate::tracking::LinkToken)).

mod page;
mod unsubscribe_contact;

pub use page::{subscription_page, SubscriptionPage, TopicChoice};
pub use unsubscribe_contact::{unsubscribe, UnsubscribeChoice, Unsubscribed};

use mailroom_domain::{AccountId, ContactId};

use crate::{tracking::LinkToken, AppError, Services};

/// The account and contact an unsubscribe token names.
///
/// # Errors
/// [`AppError::NotFound`] when the server did not mint it.
fn contact_of(services: &Services, token: &str) -> Result<(AccountId, ContactId), AppError> {
    match LinkToken::decode(token, services.secrets.as_ref()) {
        Some(LinkToken::Unsubscribe {
            account, contact, ..
        }) => Ok((account, contact)),
        _ => Err(AppError::NotFound),
    }
}
