//! The CSV import pipeline: a reader parses the file from a `Read` and routes its rows by
//! email to [`LANES`] writer threads; each writer applies every [`BATCH_ROWS`] rows of its
//! lane with [`import_contacts`] (one transaction each). Channels between them are
//! bounded, so memory stays at a few batches whatever the file's size.
//!
//! Bounds, each a clear 400 naming its figure: at most [`MAX_COLUMNS`] columns, and at
//! most [`MAX_RECORD_BYTES`] per record (enforced on the raw bytes before the CSV reader
//! buffers a record, so a 100 MiB line of commas never becomes 100 million fields). The
//! report lists at most [`MAX_REPORTED_ERRORS`](super::MAX_REPORTED_ERRORS) rejections
//! and counts all of them.

use std::{
    io::{self, Read},
    sync::mpsc::{sync_channel, SyncSender},
};

use super::{
    import_contacts::{import_contacts, start_import},
    ContactImport, ImportRow, ImportSummary,
};
use crate::{auth::Member, AppError, Services};

/// The largest record (a line, or several when a quoted cell holds line breaks) accepted.
pub const MAX_RECORD_BYTES: usize = 64 * 1024;

/// Rows per transaction: large enough that per-statement costs vanish, small enough that
/// a transaction stays short and a batch's arrays stay a few hundred kilobytes.
const BATCH_ROWS: usize = 1_000;

/// Writers working in parallel, each a transaction at a time on its own connection. One
/// writer leaves PostgreSQL one core busy per import (index upkeep and foreign-key checks
/// of thousands of rows a batch); two use a two-core machine. Rows are routed by email
/// (see [`ContactImport::lane`]), so every contact's rows are still applied in file order.
const LANES: usize = 2;

/// Full batches waiting per lane while its writer works, so parsing runs ahead of writing.
const QUEUED_BATCHES: usize = 1;

/// Imports a CSV file read from `body`: the header is checked first (nothing is written
/// for a bad one), then the rows are applied batch by batch. Blocking: run it on a
/// blocking thread.
///
/// # Errors
/// [`AppError::Invalid`] (field `header`) for a bad header or more than
/// [`MAX_COLUMNS`](super::MAX_COLUMNS) columns; [`AppError::BadRequest`] for a record
/// over [`MAX_RECORD_BYTES`] or a body that cannot be read; store failures. Batches
/// applied before a failure stay applied.
pub fn import_csv(
    services: &Services,
    member: &Member,
    body: impl Read,
) -> Result<ImportSummary, AppError> {
    let mut reader = bounded_reader(body);
    let header = read_header(&mut reader)?;
    let import = start_import(services, member, &header)?;
    write_in_lanes(services, |senders| parse_rows(&mut reader, import, senders))
}

/// A CSV reader over `body` with the record bound ([`MAX_RECORD_BYTES`]) in front. Rows
/// with another number of cells than the header are the use case's to reject, so the
/// reader does not refuse them itself.
pub(crate) fn bounded_reader<R: Read>(body: R) -> csv::Reader<RecordBound<R>> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(RecordBound::new(body))
}

/// The file's first line, the column names (a spreadsheet's byte order mark dropped).
///
/// # Errors
/// [`AppError::Invalid`] (field `header`) for an empty file or a first line that is not
/// UTF-8; [`AppError::BadRequest`] when the body cannot be read.
pub(crate) fn read_header(reader: &mut csv::Reader<impl Read>) -> Result<Vec<String>, AppError> {
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
    Ok(header)
}

/// The next data row, in file order; `None` at the end. A row that is not UTF-8 is a row
/// with that reason, not a failure (the reader goes on past it).
///
/// # Errors
/// [`AppError::BadRequest`] for a record over the bound or a body that cannot be read.
pub(crate) fn next_row(
    reader: &mut csv::Reader<impl Read>,
    record: &mut csv::StringRecord,
) -> Result<Option<ImportRow>, AppError> {
    match reader.read_record(record) {
        Ok(false) => Ok(None),
        Ok(true) => Ok(Some(ImportRow {
            line: record.position().map_or(0, csv::Position::line),
            cells: Ok(record.iter().map(str::to_owned).collect()),
        })),
        // Not fatal to the reader: the row is consumed, the next one can be read.
        Err(error) => match error.kind() {
            csv::ErrorKind::Utf8 { pos, .. } => Ok(Some(ImportRow {
                line: pos.as_ref().map_or(0, csv::Position::line),
                cells: Err("is not valid UTF-8".to_owned()),
            })),
            _ => Err(read_failure(&error)),
        },
    }
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
                        summary.add(import_contacts(services, &import, rows)?);
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
    while let Some(row) = next_row(reader, &mut record)? {
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

/// A record over the bound, the body stopped (the handler reports why), or the CSV could
/// not be read at all.
fn read_failure(error: &csv::Error) -> AppError {
    if let csv::ErrorKind::Io(io_error) = error.kind() {
        if let Some(too_long) = io_error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<RecordTooLong>())
        {
            return AppError::BadRequest(too_long.to_string());
        }
    }
    AppError::BadRequest(format!("the CSV could not be read: {error}"))
}

/// The error [`RecordBound`] reads as.
#[derive(Debug)]
struct RecordTooLong {
    line: u64,
}

impl std::fmt::Display for RecordTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the record starting on line {} is longer than {} KiB; records are limited to \
             {} KiB (65,536 bytes)",
            self.line,
            MAX_RECORD_BYTES / 1024,
            MAX_RECORD_BYTES / 1024
        )
    }
}

impl std::error::Error for RecordTooLong {}

/// A `Read` that fails once a record grows past [`MAX_RECORD_BYTES`], before the CSV
/// reader buffers it. It must find record ends exactly where the reader does, or a
/// crafted file makes the two disagree and the reader buffers an unbounded record while
/// this bound sees short ones. So it follows csv-core's states for the reader's settings
/// (comma, `"` quotes doubled to escape, `\r` or `\n` ending a record): a quote opens a
/// quoted field only at the start of a field, and is a literal anywhere else in an
/// unquoted field.
pub(crate) struct RecordBound<R> {
    inner: R,
    state: FieldState,
    record_bytes: usize,
    line: u64,
    record_line: u64,
}

/// Where csv-core is within a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldState {
    /// At the start of a field (or of a record).
    FieldStart,
    /// Inside a field that did not start with a quote: quotes are literal.
    Unquoted,
    /// Inside a quoted field: delimiters and line ends are data.
    Quoted,
    /// A quote inside a quoted field: another quote is an escaped one; anything else
    /// ends the quoting and the field goes on unquoted.
    QuoteInQuoted,
}

impl<R: Read> RecordBound<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            state: FieldState::FieldStart,
            record_bytes: 0,
            line: 1,
            record_line: 1,
        }
    }

    /// Moves the state past `byte`; true when `byte` ends the record.
    fn step(&mut self, byte: u8) -> bool {
        use FieldState::{FieldStart, QuoteInQuoted, Quoted, Unquoted};
        let quoted = self.state == Quoted;
        match (self.state, byte) {
            (Quoted, b'"') => self.state = QuoteInQuoted,
            (Quoted, _) => {}
            (FieldStart, b'"') | (QuoteInQuoted, b'"') => self.state = Quoted,
            (_, b',') => self.state = FieldStart,
            (_, b'\r' | b'\n') => self.state = FieldStart,
            (_, _) => self.state = Unquoted,
        }
        !quoted && matches!(byte, b'\r' | b'\n')
    }
}

impl<R: Read> Read for RecordBound<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buffer)?;
        for &byte in &buffer[..n] {
            if byte == b'\n' {
                self.line += 1;
            }
            if self.step(byte) {
                self.record_bytes = 0;
                self.record_line = self.line;
                continue;
            }
            self.record_bytes += 1;
            if self.record_bytes > MAX_RECORD_BYTES {
                return Err(io::Error::other(RecordTooLong {
                    line: self.record_line,
                }));
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::{RecordBound, MAX_RECORD_BYTES};

    fn read_all(text: &[u8]) -> Result<usize, String> {
        let mut out = Vec::new();
        RecordBound::new(text)
            .read_to_end(&mut out)
            .map_err(|error| error.to_string())
    }

    #[test]
    fn a_record_over_64_kib_is_refused_naming_its_line_and_the_limit() {
        let mut long = b"email\na@example.org\n".to_vec();
        long.extend(std::iter::repeat_n(b',', MAX_RECORD_BYTES + 1));
        let error = read_all(&long).expect_err("refused");
        assert!(
            error.contains("line 3") && error.contains("64 KiB"),
            "{error}"
        );
        let mut fits = std::iter::repeat_n(b',', MAX_RECORD_BYTES).collect::<Vec<_>>();
        fits.push(b'\n');
        fits.extend(std::iter::repeat_n(b',', MAX_RECORD_BYTES));
        assert!(read_all(&fits).is_ok(), "64 KiB per record, many records");
    }

    #[test]
    fn line_breaks_inside_quotes_do_not_end_a_record() {
        let mut quoted = b"\"".to_vec();
        for _ in 0..MAX_RECORD_BYTES / 2 {
            quoted.extend(b"\n\"\"");
        }
        assert!(read_all(&quoted).is_err(), "one quoted cell of many lines");
    }

    /// A quote inside an unquoted field is a literal to the CSV reader, so it must not
    /// flip the bound's idea of quoting: `x","` opens a quoted field at its second quote
    /// only, which then runs over every line after it.
    #[test]
    fn a_stray_quote_mid_field_cannot_hide_a_long_record() {
        let mut crafted = b"email,name\na@x.y,x\",\"".to_vec();
        for _ in 0..MAX_RECORD_BYTES / 2 {
            crafted.extend(b"y\n");
        }
        assert!(read_all(&crafted).is_err(), "one quoted cell of many lines");
        // And the bound agrees with the reader on ordinary quoting.
        let text = b"email,note\r\na@x.y,\"one \"\"two\"\" \nthree\"\nb@x.y,plain \"quote\n";
        assert!(read_all(text).is_ok());
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(RecordBound::new(&text[..]));
        let records: Vec<_> = reader
            .records()
            .map(|record| record.expect("record"))
            .collect();
        assert_eq!(records.len(), 3);
        assert_eq!(&records[1][1], "one \"two\" \nthree");
        assert_eq!(&records[2][1], "plain \"quote");
    }

    /// Records that end in `\r` alone still end for the bound, as for the reader.
    #[test]
    fn carriage_returns_end_records_too() {
        let mut many = Vec::new();
        for _ in 0..4 {
            many.extend(std::iter::repeat_n(b'a', MAX_RECORD_BYTES - 1));
            many.push(b'\r');
        }
        assert!(read_all(&many).is_ok());
    }
}
