//! Saved segments: list, count, get, create, update, delete, and the live count of the
//! contacts in one (docs/api-decisions.md, "Saved segments"). A definition is checked
//! by the one check of `POST …/contacts/search` (`contacts::audience_segment`), and
//! counted by its use case.

mod count_segment_contacts;
mod create_segment;
mod delete_segment;
mod get_segment;
mod list_segments;
mod update_segment;

pub use count_segment_contacts::count_segment_contacts;
pub use create_segment::create_segment;
pub use delete_segment::delete_segment;
pub use get_segment::get_segment;
pub use list_segments::{count_segments, list_segments};
pub use update_segment::update_segment;

use crate::{AppError, BrokenReference, Duplicate, StoreError};

/// Translates the writes' constraint violations into the client's mistakes they are: a
/// name another segment has, or a topic deleted since the definition was checked.
fn refused_write(error: StoreError) -> AppError {
    match error {
        StoreError::Duplicate(Duplicate::SegmentName) => AppError::invalid(
            "name",
            "is already the name of another segment of this account (names are compared \
                 case-insensitively)",
        ),
        StoreError::BrokenReference(BrokenReference::SegmentTopic) => {
            AppError::invalid("topicId", "must be the id of a topic of this account")
        }
        other => other.into(),
    }
}
