#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod account;
pub mod announcement;
pub mod attribute;
pub mod automation;
pub mod branding;
pub mod condition;
pub mod console;
pub mod contact;
pub mod egress;
pub mod email;
pub mod error;
pub mod feedback;
pub mod feedback_source;
pub mod form;
pub mod id;
pub mod mail_server;
pub mod message;
pub mod message_lifecycle;
pub mod paging;
pub mod patch;
pub mod return_path;
pub mod saved_segment;
pub mod secret;
pub mod sending_domain;
pub mod slug;
pub mod starter;
pub mod suppression;
pub mod template;
pub mod timestamp;
pub mod token;
pub mod topic;
pub mod webhook;
pub mod webhook_event;
pub mod webhook_signature;

pub use error::{FieldError, ValidationErrors};
pub use id::{
    AccountId, AnnouncementId, AutomationId, ConsoleSessionId, ContactEventId, ContactId,
    DkimKeyId, FeedbackSourceId, FormConfirmationId, FormId, MailServerId, MessageId, SegmentId,
    SendingDomainId, TemplateId, TokenId, TopicId, UserId, WebhookEventId,
};
pub use timestamp::Timestamp;
/// The UUID type behind every identifier, re-exported so ports can mint ids.
pub use uuid::Uuid;
