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
