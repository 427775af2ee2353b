//! Announcement topics: list, count, get, create, update, delete.

mod count_topics;
mod create_topic;
mod delete_topic;
mod get_topic;
mod list_topics;
mod update_topic;

pub use count_topics::count_topics;
pub use create_topic::create_topic;
pub use delete_topic::delete_topic;
pub use get_topic::get_topic;
pub use list_topics::list_topics;
pub use update_topic::update_topic;

use crate::{AppError, Duplicate, StoreError};

/// Translates the name's unique violation into the client's mistake it is: topics are
/// told apart by name on the unsubscribe page and in the console, so two may not share
/// one (in any letters' case).
fn name_taken(error: StoreError) -> AppError {
    match error {
        StoreError::Duplicate(Duplicate::TopicName) => AppError::invalid(
            "name",
            "is already the name of another topic of this account (names are compared \
                 case-insensitively)",
        ),
        other => other.into(),
    }
}
