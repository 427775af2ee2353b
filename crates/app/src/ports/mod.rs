//! Port traits: what the use cases need from the outside world, as documented contracts.
//!
//! Repositories are synchronous and live on one [`UnitOfWork`] (one database transaction);
//! adapters translate driver errors into [`StoreError`](crate::StoreError) variants: a
//! unique rule a write broke into `Duplicate` naming what it keeps unique, a broken
//! reference into `BrokenReference`, never a bare failure or a constraint's name.

mod announcements;
mod automations;
mod console;
mod contact_import;
mod contacts;
mod database;
mod feedback;
mod feedback_sources;
mod forms;
mod mail_server_records;
mod mail_servers;
mod messages;
mod queue_stats;
mod queue_wakeup;
mod records;
mod renderer;
mod repositories;
mod saved_segments;
mod sealed_secrets;
mod segments;
mod sending_domains;
mod suppressions;
mod system;
mod templates;
mod topics;
mod tracking;
mod webhook_events;
mod webhook_sender;

pub use announcements::{AnnouncementRepository, AudienceBatch, QueuedAudience};
pub use automations::AutomationRepository;
pub use console::{ConsoleRepository, ConsoleSessionRecord};
pub use contact_import::{ContactImportRepository, ImportedContact};
pub use contacts::{ContactEvent, ContactRepository, EventName, EventOfEmail, RecordedEvent};
pub use database::{in_single_statement, in_transaction, Database, UnitOfWork};
pub use feedback::FeedbackRepository;
pub use feedback_sources::{FeedbackSourceRecord, FeedbackSourceRepository, SnsAnswer, SnsClient};
pub use forms::{FormConfirmation, FormRepository};
pub use mail_server_records::{MailServerRecord, MailServerRepository};
pub use mail_servers::{
    CredentialCheck, MailServerProbe, ProbeError, SavedServer, SmtpEndpoint, SmtpSecurity,
};
pub use messages::{
    ClaimedMessage, DeliveredTo, DkimSigning, IdempotentMessage, ListUnsubscribe, MailAccepted,
    MailFuture, Mailer, MessageRepository, OutgoingMail,
};
pub use queue_stats::{QueueDepth, QueueStats, QueueStatsRepository};
pub use queue_wakeup::{QueueEvent, QueueWakeup};
pub use records::*;
pub use renderer::{InProcessRenderer, TemplateRenderer};
pub use repositories::*;
pub use saved_segments::SavedSegmentRepository;
pub use sealed_secrets::{SealedColumn, SealedRow, SealedRowKey, SealedSecretRepository};
pub use segments::SegmentRepository;
pub use sending_domains::{
    DkimKeyGenerator, DkimKeyPair, DomainDns, SendingDomainRepository, SigningKeyRecord,
};
pub use suppressions::SuppressionRepository;
pub use system::*;
pub use templates::TemplateRepository;
pub use topics::TopicRepository;
pub use tracking::{SubscriptionRepository, TrackingRepository};
pub use webhook_events::{Lease, WebhookEventRepository};
pub use webhook_sender::{
    SendError, SendFuture, UrlRefusal, WebhookAnswer, WebhookAuth, WebhookRequest, WebhookSender,
    WebhookUrlGuard,
};
