//! `POST /v2/accounts/{accountId}/contacts/import`: a CSV file streamed into batched
//! upserts.
//!
//! The file is never held whole in memory. The handler forwards the body's chunks through
//! a small bounded channel to a blocking task, which parses CSV from a `Read` over that
//! channel and routes the rows by email to [`LANES`] writer threads; each writer hands
//! every [`BATCH_ROWS`] rows of its lane to the import use case (one transaction each).
//! The bounds give back-pressure: a client cannot upload faster than rows are stored, and
//! memory stays at a few chunks plus a few batches.

use std::{
    io::{self, Read},
    sync::mpsc::{sync_channel, SyncSender},
};

use actix_web::{
    http::{header, StatusCode},
    post,
    web::{self, Bytes},
    HttpRequest,
};
use futures_util::StreamExt;
use mailroom_app::{
    auth::Member,
    contacts::{self, ContactImport, ImportRow, ImportSummary},
    AppError, Services,
};
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

/// Rows per transaction: large enough that per-statement costs vanish, small enough that
/// a transaction stays short and a batch's arrays stay a few hundred kilobytes.
const BATCH_ROWS: usize = 1_000;

/// Body chunks in flight between the network and the parser.
const CHANNEL_CHUNKS: usize = 16;

/// Writers working in parallel, each a transaction at a time on its own connection. One
/// writer leaves PostgreSQL one core busy per import (index upkeep and foreign-key checks
/// of thousands of rows a batch); two use a two-core machine. Rows are routed by email
/// (see [`ContactImport::lane`]), so every contact's rows are still applied in file order.
const LANES: usize = 2;

/// Full batches waiting per lane while its writer works, so parsing runs ahead of writing.
const QUEUED_BATCHES: usize = 1;

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

impl From<ImportSummary> for ImportReportDto {
    fn from(summary: ImportSummary) -> Self {
        Self {
            created: summary.created,
            updated: summary.updated,
            rejected: summary.rejected,
            errors: summary
                .errors
                .into_iter()
                .map(|row| ImportErrorDto {
                    line: row.line,
                    reason: row.reason,
                })
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
        (status = 413, body = Problem)
    )
)]
#[post("/accounts/{accountId}/contacts/import")]
pub(crate) async fn import_contacts(
    services: web::Data<Services>,
    member: Membership,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<web::Json<ImportReportDto>, ApiError> {
    if !is_csv(&request) {
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
    let (sender, receiver) = mpsc::channel(CHANNEL_CHUNKS);
    let member = member.0;
    let import =
        run_blocking(move || import_stream(&services, &member, ChannelReader::new(receiver)));
    let (imported, pumped) = tokio::join!(import, pump_body(payload, sender));
    // A body that failed (too large, cut off) is the cause of whatever the reader then
    // reported, so it is the answer.
    pumped?;
    Ok(web::Json(imported?.into()))
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
/// When the parser has stopped (a bad header, a failed batch), reading stops as well.
async fn pump_body(
    mut payload: web::Payload,
    sender: mpsc::Sender<io::Result<Bytes>>,
) -> Result<(), ApiError> {
    let mut received: u64 = 0;
    while let Some(chunk) = payload.next().await {
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
        let parser_gone = sender.send(item).await.is_err();
        if let Some(failure) = failure {
            return Err(failure);
        }
        if parser_gone {
            break;
        }
    }
    Ok(())
}

/// A blocking `Read` over the chunks the handler forwards; end of file when the handler
/// drops its sender.
struct ChannelReader {
    receiver: mpsc::Receiver<io::Result<Bytes>>,
    current: Bytes,
}

impl ChannelReader {
    fn new(receiver: mpsc::Receiver<io::Result<Bytes>>) -> Self {
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

/// Parses the CSV and applies it batch by batch (runs on the blocking pool).
fn import_stream(
    services: &Services,
    member: &Member,
    body: impl Read,
) -> Result<ImportSummary, AppError> {
    // Rows with another number of cells than the header are the use case's to reject,
    // so the reader must not refuse them itself.
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(body);
    let mut record = csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => {}
        Ok(false) => {
            return Err(AppError::invalid(
                "header",
                "the file is empty; the first line must name the columns, one of them 'email'",
            ))
        }
        Err(error) if matches!(error.kind(), csv::ErrorKind::Utf8 { .. }) => {
            return Err(AppError::invalid(
                "header",
                "the first line is not valid UTF-8",
            ))
        }
        Err(error) => return Err(read_failure(&error)),
    }
    let header: Vec<String> = record
        .iter()
        .enumerate()
        // Spreadsheets often start UTF-8 files with a byte order mark.
        .map(|(index, name)| {
            if index == 0 {
                name.trim_start_matches('\u{feff}')
            } else {
                name
            }
        })
        .map(str::to_owned)
        .collect();
    let import = contacts::start_import(services, member, &header)?;
    write_in_lanes(services, |senders| parse_rows(&mut reader, import, senders))
}

/// A batch of one lane, with the import as it stood when the batch was complete (the
/// types the file had fixed by then).
type Batch = (ContactImport, Vec<ImportRow>);

/// Runs one writer thread per lane, each applying its batches in order, while `parse`
/// (on this thread) fills them. A failed writer stops the parse; the first failure is the
/// answer, a parse failure before a writer's.
fn write_in_lanes(
    services: &Services,
    parse: impl FnOnce(&[SyncSender<Batch>]) -> Result<(), AppError>,
) -> Result<ImportSummary, AppError> {
    let span = tracing::Span::current();
    std::thread::scope(|scope| {
        let mut senders = Vec::with_capacity(LANES);
        let mut writers = Vec::with_capacity(LANES);
        for _ in 0..LANES {
            let (sender, batches) = sync_channel::<Batch>(QUEUED_BATCHES);
            let span = span.clone();
            writers.push(scope.spawn(move || {
                span.in_scope(|| {
                    let mut summary = ImportSummary::default();
                    for (import, rows) in batches {
                        summary.add(contacts::import_contacts(services, &import, rows)?);
                    }
                    Ok::<_, AppError>(summary)
                })
            }));
            senders.push(sender);
        }
        let mut failure = parse(&senders).err();
        // Closing the lanes lets each writer finish its queue and return.
        drop(senders);
        let mut summary = ImportSummary::default();
        for writer in writers {
            match writer.join() {
                Ok(Ok(part)) => summary.merge(part),
                Ok(Err(error)) => {
                    failure.get_or_insert(error);
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(summary),
        }
    })
}

/// Reads the data rows, in file order, into per-lane batches and hands over each full
/// batch. Returns early, without error, when a writer has stopped: its error is the one
/// to report.
fn parse_rows(
    reader: &mut csv::Reader<impl Read>,
    mut import: ContactImport,
    lanes: &[SyncSender<Batch>],
) -> Result<(), AppError> {
    let mut record = csv::StringRecord::new();
    let mut batches: Vec<Vec<ImportRow>> = lanes
        .iter()
        .map(|_| Vec::with_capacity(BATCH_ROWS))
        .collect();
    loop {
        let row = match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => ImportRow {
                line: record.position().map_or(0, csv::Position::line),
                cells: Ok(record.iter().map(str::to_owned).collect()),
            },
            // Not fatal to the reader: the row is consumed, the next one can be read.
            Err(error) => match error.kind() {
                csv::ErrorKind::Utf8 { pos, .. } => ImportRow {
                    line: pos.as_ref().map_or(0, csv::Position::line),
                    cells: Err("is not valid UTF-8".to_owned()),
                },
                _ => return Err(read_failure(&error)),
            },
        };
        import.plan_row(&row);
        let lane = import.lane(&row, lanes.len());
        let (Some(batch), Some(sender)) = (batches.get_mut(lane), lanes.get(lane)) else {
            return Err(AppError::Internal(format!(
                "import lane {lane} out of range"
            )));
        };
        batch.push(row);
        if batch.len() == BATCH_ROWS {
            let full = std::mem::replace(batch, Vec::with_capacity(BATCH_ROWS));
            if sender.send((import.clone(), full)).is_err() {
                return Ok(());
            }
        }
    }
    for (batch, sender) in batches.into_iter().zip(lanes) {
        if !batch.is_empty() && sender.send((import.clone(), batch)).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// The body stopped (the handler reports why) or the CSV could not be read at all.
fn read_failure(error: &csv::Error) -> AppError {
    AppError::BadRequest(format!("the CSV could not be read: {error}"))
}
