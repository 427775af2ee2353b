use crate::ports::{
    FeedbackSourceRepository, FormRepository, SubscriptionRepository, TrackingRepository,
};
use crate::{
    ports::{
        AccountRepository, AnnouncementRepository, AutomationRepository, ConsoleRepository,
        ContactImportRepository, ContactRepository, FeedbackRepository, MailServerRepository,
        MessageRepository, QueueStatsRepository, SavedSegmentRepository, SealedSecretRepository,
        SegmentRepository, SendingDomainRepository, StarterDataRepository, SuppressionRepository,
        TemplateRepository, TokenRepository, TopicRepository, UserRepository,
        WebhookEventRepository,
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
    + SavedSegmentRepository
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
    + SuppressionRepository
    + FormRepository
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

    /// Runs `work` outside an explicit transaction: each statement it runs commits on its
    /// own, under the same bounds (statement timeout) as a transaction of this database.
    /// Only for work of one write statement, which is atomic by itself; it saves the
    /// round trips of `BEGIN` and `COMMIT`. The default runs `work` in a transaction.
    ///
    /// # Errors
    /// As [`Database::run_in_transaction`].
    fn run_single_statement(
        &self,
        work: &mut dyn FnMut(&mut dyn UnitOfWork) -> Result<(), AppError>,
    ) -> Result<(), AppError> {
        self.run_in_transaction(work)
    }

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
    run_typed(work, |work| db.run_in_transaction(work))
}

/// Runs `work`, one write statement, outside an explicit transaction and returns its
/// value: the typed face of [`Database::run_single_statement`].
///
/// # Errors
/// As [`Database::run_in_transaction`].
pub fn in_single_statement<R>(
    db: &dyn Database,
    work: impl FnOnce(&mut dyn UnitOfWork) -> Result<R, AppError>,
) -> Result<R, AppError> {
    run_typed(work, |work| db.run_single_statement(work))
}

/// Adapts a typed `FnOnce` to the object-safe `FnMut` the port's runners take.
fn run_typed<R>(
    work: impl FnOnce(&mut dyn UnitOfWork) -> Result<R, AppError>,
    run: impl FnOnce(
        &mut dyn FnMut(&mut dyn UnitOfWork) -> Result<(), AppError>,
    ) -> Result<(), AppError>,
) -> Result<R, AppError> {
    let mut work = Some(work);
    let mut output = None;
    run(&mut |tx| {
        let work = work
            .take()
            .ok_or_else(|| AppError::Internal("transaction body ran twice".into()))?;
        output = Some(work(tx)?);
        Ok(())
    })?;
    output.ok_or_else(|| AppError::Internal("transaction committed without a result".into()))
}
