//! `POST /v2/accounts/{accountId}/contacts/import`: a CSV file streamed into batched
//! upserts.
//!
//! The file is never held whole in memory. The handler forwards the body's chunks through
//! a small bounded channel to a blocking task running the app's
//! [`contacts::import_csv`], which reads them as a `Read` (the pipeline of parser and
//! batch writers, and its bounds, live there). The channel gives back-pressure: a client
//! cannot upload faster than rows are stored.
//!
//! A slow upload holds that blocking thread, so time is bounded too: the parser starts
//! only once the first bytes arrive, the upload may send nothing for at most
//! [`ImportLimits::idle`] (`MAILROOM_IMPORT_IDLE_TIMEOUT`) and may take at most
//! [`IMPORT_DEADLINE`] in all (408 past either), and an account runs at most
//! `MAX_IMPORTS_PER_ACCOUNT` imports at once (429 beyond).

use std::{
    io::{self, Read},
    time::Duration,
};

use actix_web::{
    http::{header, StatusCode},
    post,
    web::{self, Bytes},
    HttpRequest,
};
use futures_util::StreamExt;
use mailroom_app::{auth::Member, contacts, contacts::ImportSummary, AppError, Services};
use serde::Serialize;
use tokio::sync::mpsc;
use utoipa::ToSchema;

use crate::{
    blocking::run_blocking,
    problem::{ApiError, Problem},
    tenancy::Membership,
};

/// The largest import accepted (413 beyond). Imports are exempt from the 1 MiB JSON
/// limit; this bound keeps a single request from running for hours.
pub const MAX_IMPORT_BYTES: u64 = 200 * 1024 * 1024;

/// Body chunks in flight between the network and the parser.
pub(crate) const CHANNEL_CHUNKS: usize = 16;

/// The longest an import's upload may take, start to end.
pub const IMPORT_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// The time bounds of an import's upload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImportLimits {
    /// The longest the upload may send nothing.
    pub(crate) idle: Duration,
    /// The longest it may take in all.
    pub(crate) overall: Duration,
}

/// Why an upload stopped short.
pub(crate) enum Stalled {
    /// Nothing arrived for [`ImportLimits::idle`].
    Idle(Duration),
    /// It ran past [`ImportLimits::overall`].
    Overall(Duration),
}

impl Stalled {
    /// How the API answers it.
    pub(crate) fn problem(&self) -> ApiError {
        ApiError::new(StatusCode::REQUEST_TIMEOUT, self.text())
    }

    /// What it says.
    pub(crate) fn text(&self) -> String {
        match self {
            Self::Idle(idle) => format!(
                "the upload sent nothing for {} s; the import stopped there",
                idle.as_secs()
            ),
            Self::Overall(overall) => format!(
                "the upload took longer than {} minutes; the import stopped there",
                overall.as_secs() / 60
            ),
        }
    }
}

/// The next item of `stream`, waited for within the limits (`started` is when the upload
/// began).
pub(crate) async fn next_within<S>(
    stream: &mut S,
    limits: ImportLimits,
    started: tokio::time::Instant,
) -> Result<Option<S::Item>, Stalled>
where
    S: futures_util::Stream + Unpin,
{
    let left = limits.overall.saturating_sub(started.elapsed());
    if left.is_zero() {
        return Err(Stalled::Overall(limits.overall));
    }
    match tokio::time::timeout(limits.idle.min(left), stream.next()).await {
        Ok(item) => Ok(item),
        Err(_) if limits.idle <= left => Err(Stalled::Idle(limits.idle)),
        Err(_) => Err(Stalled::Overall(limits.overall)),
    }
}

/// The answer of an import.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImportReportDto {
    /// Contacts created.
    pub created: u64,
    /// Rows applied to contacts that already existed (also an earlier row of the same
    /// file with the same email).
    pub updated: u64,
    /// Rows not imported.
    pub rejected: u64,
    /// Why rows were rejected, in file order; at most 1,000 entries (`rejected` stays
    /// exact).
    pub errors: Vec<ImportErrorDto>,
}

/// One rejected row.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImportErrorDto {
    /// 1-based line of the file where the row starts (the header is line 1).
    pub line: u64,
    /// What is wrong with it.
    pub reason: String,
}

impl From<contacts::RejectedRow> for ImportErrorDto {
    fn from(row: contacts::RejectedRow) -> Self {
        Self {
            line: row.line,
            reason: row.reason,
        }
    }
}

impl From<ImportSummary> for ImportReportDto {
    fn from(summary: ImportSummary) -> Self {
        Self {
            created: summary.created,
            updated: summary.updated,
            rejected: summary.rejected,
            errors: summary
                .errors
                .into_iter()
                .map(ImportErrorDto::from)
                .collect(),
        }
    }
}

/// Import contacts from CSV: a header of `email` and custom attribute slugs, one contact
/// per line. Rows are applied in batches of 1,000, each in its own transaction; bad rows
/// are reported with their line and do not stop the others. An empty cell writes nothing.
/// A value takes the type already fixed for its slug when it can be read as that type,
/// otherwise `true`/`false` is a boolean, a number a number, an RFC 3339 text a date and
/// anything else a string. A file that fails part way (over 200 MiB, cut off, database
/// unavailable) keeps the batches applied before the failure; sending it again is safe,
/// since rows upsert.
#[utoipa::path(
    tag = "contacts", security(("bearer" = [])),
    request_body(content = String, content_type = "text/csv", description = "CSV with a header row: `email` plus attribute slugs"),
    params(("accountId" = String, Path, description = "Account id")),
    responses(
        (status = 200, body = ImportReportDto),
        (status = 400, body = Problem),
        (status = 401, body = Problem),
        (status = 408, body = Problem, description = "The upload sent nothing for 30 s, or took longer than 30 minutes"),
        (status = 413, body = Problem),
        (status = 429, body = Problem, description = "The account already runs 2 imports")
    )
)]
#[post("/accounts/{accountId}/contacts/import")]
pub(crate) async fn import_contacts(
    services: web::Data<Services>,
    limits: web::Data<ImportLimits>,
    member: Membership,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<web::Json<ImportReportDto>, ApiError> {
    let summary = import_csv_body(
        services,
        **limits,
        member,
        &request,
        payload,
        contacts::import_csv,
    )
    .await?;
    Ok(web::Json(summary.into()))
}

/// Streams a CSV upload into `import` on a blocking thread, under the bounds above: the
/// content type, [`MAX_IMPORT_BYTES`], the account's import slots, the upload's time
/// bounds. The contact and the suppression imports share it.
pub(crate) async fn import_csv_body<T: Send + 'static>(
    services: web::Data<Services>,
    limits: ImportLimits,
    member: Membership,
    request: &HttpRequest,
    mut payload: web::Payload,
    import: impl FnOnce(&Services, &Member, ChannelReader) -> Result<T, AppError> + Send + 'static,
) -> Result<T, ApiError> {
    if !is_csv(request) {
        return Err(ApiError::bad_request(
            "the body must be CSV sent with Content-Type: text/csv",
        ));
    }
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if announced.is_some_and(|length| length > MAX_IMPORT_BYTES) {
        return Err(too_large());
    }
    let _slot = services.imports.enter(member.0.account()).ok_or_else(|| {
        ApiError::from(AppError::TooManyAtOnce(format!(
            "this account already runs {} imports; retry once one has answered",
            services.imports.limit()
        )))
    })?;
    let started = tokio::time::Instant::now();
    // No parser thread for an upload that sends nothing.
    let first = next_within(&mut payload, limits, started)
        .await
        .map_err(|stalled| stalled.problem())?;
    let (sender, receiver) = mpsc::channel(CHANNEL_CHUNKS);
    let member = member.0;
    let imported = run_blocking(move || import(&services, &member, ChannelReader::new(receiver)));
    let pump = pump_body(first, payload, sender, limits, started);
    let (imported, pumped) = tokio::join!(imported, pump);
    // A body that failed (too large, cut off) is the cause of whatever the reader then
    // reported, so it is the answer.
    pumped?;
    imported
}

fn is_csv(request: &HttpRequest) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("text/csv"))
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "the import is larger than 200 MiB; split the file",
    )
}

/// Forwards the body to the parser. A failure is forwarded too, so the parser stops
/// instead of taking a cut-off body for a complete one and importing its last rows.
/// When the parser has stopped (a bad header, a record over the bound, a failed batch),
/// the rest of the body is read and dropped chunk by chunk (memory stays at one chunk),
/// so the client, still sending, reads the answer instead of a reset connection.
async fn pump_body(
    first: Option<Result<Bytes, actix_web::error::PayloadError>>,
    mut payload: web::Payload,
    sender: mpsc::Sender<io::Result<Bytes>>,
    limits: ImportLimits,
    started: tokio::time::Instant,
) -> Result<(), ApiError> {
    let mut received: u64 = 0;
    let mut next = first;
    loop {
        let Some(chunk) = next.take() else {
            return Ok(());
        };
        let (item, failure) = match chunk {
            Ok(bytes) => {
                received += bytes.len() as u64;
                if received > MAX_IMPORT_BYTES {
                    (
                        Err(io::Error::other("the import is too large")),
                        Some(too_large()),
                    )
                } else {
                    (Ok(bytes), None)
                }
            }
            Err(error) => (
                Err(io::Error::other(error.to_string())),
                Some(ApiError::bad_request(format!(
                    "the body could not be read: {error}"
                ))),
            ),
        };
        // Once the parser is gone its chunks are dropped here, unread.
        if !sender.is_closed() {
            let _ = sender.send(item).await;
        }
        if let Some(failure) = failure {
            return Err(failure);
        }
        match next_within(&mut payload, limits, started).await {
            Ok(item) => next = item,
            Err(stalled) => {
                // The parser stops on the error instead of taking what came for a whole
                // file.
                let _ = sender.send(Err(io::Error::other(stalled.text()))).await;
                return Err(stalled.problem());
            }
        }
    }
}

/// A blocking `Read` over the chunks the handler forwards; end of file when the handler
/// drops its sender. The console's import form reads its file part through it too.
pub(crate) struct ChannelReader {
    receiver: mpsc::Receiver<io::Result<Bytes>>,
    current: Bytes,
}

impl ChannelReader {
    pub(crate) fn new(receiver: mpsc::Receiver<io::Result<Bytes>>) -> Self {
        Self {
            receiver,
            current: Bytes::new(),
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.receiver.blocking_recv() {
                Some(chunk) => self.current = chunk?,
                None => return Ok(0),
            }
        }
        let n = buffer.len().min(self.current.len());
        buffer[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}
