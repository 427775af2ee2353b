//! Announcements: create (now or at `sendAt`), read, pause, resume and cancel, and the two worker steps that carry one out
//! (docs/design.md#9-automations-and-announcements): [`expand_next_batch`] turns the audience into messages, a batch per
//! transaction, and [`complete_finished`] marks an announcement `completed` once every
//! message has a final state.

mod control_announcement;
mod create_announcement;
mod expand;
mod get_announcement;
mod list_announcements;
mod review_announcement;

pub use control_announcement::control_announcement;
pub use create_announcement::create_announcement;
pub use expand::{complete_finished, expand_next_batch, ExpansionBatch};
pub use get_announcement::{get_announcement, get_announcement_progress};
pub use list_announcements::{count_announcements, list_announcements};
pub use review_announcement::{review_announcement, AnnouncementReview};
