use crate::ports::{FeedbackSourceRepository, SubscriptionRepository, TrackingRepository};
use crate::{
    ports::{
        AccountRepository, AnnouncementRepository, AutomationRepository, ConsoleRepository,
        ContactImportRepository, ContactRepository, FeedbackRepository, MailServerRepository,
        MessageRepository, QueueStatsRepository, SealedSecretRepository, SegmentRepository,
        SendingDomainRepository, StarterDataRepository, TemplateRepository, TokenRepository,
        TopicRepository, UserRepository, WebhookEventRepository,
    },
    AppError, StoreError,
};

/// Every repository, on one transaction. Use cases receive `&mut dyn UnitOfWork`.
pub trait UnitOfWork:
    UserRepository
    + TokenRepository
    + AccountRepository
    + StarterDataRepository
    + TemplateRepository
    + MailServerRepository
    + TopicRepository
    + SegmentRepository
    + ContactRepository
    + ContactImportRepository
    + WebhookEventRepository
    + MessageRepository
    + AutomationRepository
    + AnnouncementRepository
    + FeedbackRepository
    + FeedbackSourceRepository
    + TrackingRepository
    + SubscriptionRepository
    + QueueStatsRepository
    + SealedSecretRepository
    + SendingDomainRepository
    + ConsoleRepository
{
}

/// Opens transactions.
pub trait Database: Send + Sync {
    /// Runs `work` in one transaction: committed when it returns `Ok`, rolled back when it
    /// returns `Err` or panics.
    ///
    /// # Errors
    /// The error `work` returned, or [`AppError::Unavailable`] when no connection could be
    /// had, or [`AppError::Internal`] when the commit failed for another reason.
    fn run_in_transaction(
        &self,
        work: &mut dyn FnMut(&mut dyn UnitOfWork) -> Result<(), AppError>,
    ) -> Result<(), AppError>;

    /// Checks that the store answers, for readiness probes.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when it does not.
    fn check_health(&self) -> Result<(), StoreError>;
}

/// Runs `work` in one transaction and returns its value: the typed face of
/// [`Database::run_in_transaction`], which must stay object safe.
///
/// # Errors
/// As [`Database::run_in_transaction`].
pub fn in_transaction<R>(
    db: &dyn Database,
    work: impl FnOnce(&mut dyn UnitOfWork) -> Result<R, AppError>,
) -> Result<R, AppError> {
    let mut work = Some(work);
    let mut output = None;
    db.run_in_transaction(&mut |tx| {
        let work = work
            .take()
            .ok_or_else(|| AppError::Internal("transaction body ran twice".into()))?;
        output = Some(work(tx)?);
        Ok(())
    })?;
    output.ok_or_else(|| AppError::Internal("transaction committed without a result".into()))
}
