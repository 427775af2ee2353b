#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod client;
pub mod error;
pub mod operations;
pub mod paging;
pub mod retry;
mod streams;
pub mod types;
pub mod webhooks;

pub use client::{Client, ClientBuilder, IDEMPOTENCY_KEY_HEADER};
pub use error::{Error, FieldError, Problem, Result};
pub use operations::{Operation, Replay, OPERATIONS};
pub use paging::{Page, PageRequest};
pub use retry::RetryPolicy;
pub use types::*;

/// The `Stream` trait of the `stream_*` methods, and its combinators.
pub use futures_util::{stream::Stream, StreamExt, TryStreamExt};
/// The service's id and time types, used in requests and answers.
pub use mailroom_domain::{
    AccountId, AnnouncementId, AutomationId, ContactEventId, ContactId, MailServerId, MessageId,
    SegmentId, SendingDomainId, TemplateId, Timestamp, TokenId, TopicId, UserId, WebhookEventId,
};
