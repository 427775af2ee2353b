//! `POST …/suppressions/import`: addresses listed by hand from a CSV file, with the
//! contact import's bounds (the record bound, the report's size; the HTTP layer adds the
//! body's size and time bounds and the per-account import slots). One column `email`,
//! optionally `detail`; every [`BATCH_ROWS`] rows are one transaction, so memory stays
//! at one batch whatever the file's size.

use std::{collections::HashSet, io::Read};

use mailroom_domain::{
    email::EmailAddress,
    suppression::{
        AddressHash, SuppressionEntry, SuppressionReason, SuppressionSource, MAX_SUPPRESSION_DETAIL,
    },
};

use super::account_key;
use crate::{
    auth::Member,
    contacts::{bounded_reader, next_row, read_header, RejectedRow, MAX_REPORTED_ERRORS},
    ports::in_transaction,
    AppError, Services,
};

/// Rows per transaction.
const BATCH_ROWS: usize = 1_000;

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SuppressionImportSummary {
    /// Addresses newly listed by hand.
    pub added: u64,
    /// Rows whose address was listed by hand already (also an earlier row of the file).
    pub already_listed: u64,
    /// Rows not imported.
    pub rejected: u64,
    /// The first [`MAX_REPORTED_ERRORS`] rejections, in file order.
    pub errors: Vec<RejectedRow>,
}

impl SuppressionImportSummary {
    fn reject(&mut self, line: u64, reason: impl Into<String>) {
        self.rejected += 1;
        if self.errors.len() < MAX_REPORTED_ERRORS {
            self.errors.push(RejectedRow {
                line,
                reason: reason.into(),
            });
        }
    }
}

/// The column positions a header names.
struct Columns {
    email: usize,
    detail: Option<usize>,
}

fn columns(header: &[String]) -> Result<Columns, AppError> {
    let mut email = None;
    let mut detail = None;
    for (index, name) in header.iter().enumerate() {
        let slot = match name.trim() {
            "email" => &mut email,
            "detail" => &mut detail,
            other => {
                return Err(AppError::invalid(
                    "header",
                    format!("unknown column {other:?}; the columns are email and detail"),
                ))
            }
        };
        if slot.replace(index).is_some() {
            return Err(AppError::invalid(
                "header",
                format!("the column {:?} is named twice", name.trim()),
            ));
        }
    }
    let email = email
        .ok_or_else(|| AppError::invalid("header", "the first line must name an 'email' column"))?;
    Ok(Columns { email, detail })
}

/// A row read: the address and its note.
struct Listed {
    email: EmailAddress,
    detail: Option<String>,
}

fn parse(columns: &Columns, cells: &[String]) -> Result<Listed, String> {
    let email = cells
        .get(columns.email)
        .map(String::as_str)
        .unwrap_or_default();
    let email = EmailAddress::parse(email).map_err(|error| format!("email {error}"))?;
    let detail = columns
        .detail
        .and_then(|index| cells.get(index))
        .filter(|detail| !detail.is_empty())
        .cloned();
    if let Some(detail) = &detail {
        if detail.chars().count() > MAX_SUPPRESSION_DETAIL {
            return Err(format!(
                "detail must be at most {MAX_SUPPRESSION_DETAIL} characters"
            ));
        }
        if detail.contains('\0') {
            return Err("detail must not contain the NUL character".into());
        }
    }
    Ok(Listed { email, detail })
}

/// Lists the file's addresses by hand (`manual`, source `import`). Blocking: run it on a
/// blocking thread.
///
/// # Errors
/// [`AppError::Invalid`] (field `header`) for a bad header; [`AppError::BadRequest`] for
/// a record over the bound or a body that cannot be read; store failures. Batches
/// applied before a failure stay applied; sending the file again is safe.
pub fn import_suppressions(
    services: &Services,
    member: &Member,
    body: impl Read,
) -> Result<SuppressionImportSummary, AppError> {
    let mut reader = bounded_reader(body);
    let columns = columns(&read_header(&mut reader)?)?;
    let mut summary = SuppressionImportSummary::default();
    let mut record = csv::StringRecord::new();
    let mut batch: Vec<Listed> = Vec::with_capacity(BATCH_ROWS);
    loop {
        let row = next_row(&mut reader, &mut record)?;
        let done = row.is_none();
        if let Some(row) = row {
            match row.cells.and_then(|cells| parse(&columns, &cells)) {
                Ok(listed) => batch.push(listed),
                Err(reason) => summary.reject(row.line, reason),
            }
        }
        if batch.len() == BATCH_ROWS || (done && !batch.is_empty()) {
            let rows = std::mem::replace(&mut batch, Vec::with_capacity(BATCH_ROWS));
            let added = write_batch(services, member, rows.as_slice())?;
            summary.added += added;
            summary.already_listed += rows.len() as u64 - added;
        }
        if done {
            return Ok(summary);
        }
    }
}

/// One batch in one transaction; how many entries were new.
fn write_batch(services: &Services, member: &Member, rows: &[Listed]) -> Result<u64, AppError> {
    let account = member.account();
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        let key = account_key(tx, services, account)?;
        let mut seen: HashSet<AddressHash> = HashSet::with_capacity(rows.len());
        let entries: Vec<SuppressionEntry> = rows
            .iter()
            .map(|row| SuppressionEntry {
                address_hash: key.hash(row.email.as_str()),
                reason: SuppressionReason::Manual,
                source: SuppressionSource::Import,
                email: Some(row.email.as_str().to_owned()),
                detail: row.detail.clone(),
                created_at: now,
            })
            // An address twice in one batch is one entry; the later row is "already".
            .filter(|entry| seen.insert(entry.address_hash))
            .collect();
        Ok(tx.add_suppressions(account, &entries)?)
    })
}

#[cfg(test)]
mod tests {
    use super::{columns, parse};

    fn header(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn the_header_names_email_and_may_name_detail() {
        assert!(columns(&header(&["email"])).is_ok());
        let both = columns(&header(&["detail", "email"])).unwrap();
        assert_eq!((both.email, both.detail), (1, Some(0)));
        assert!(columns(&header(&["detail"])).is_err());
        assert!(columns(&header(&["email", "name"])).is_err());
        assert!(columns(&header(&["email", "email"])).is_err());
    }

    #[test]
    fn a_row_needs_an_address_and_a_short_detail() {
        let columns = columns(&header(&["email", "detail"])).unwrap();
        let cells = |email: &str, detail: &str| vec![email.to_owned(), detail.to_owned()];
        assert!(parse(&columns, &cells("a@example.org", ""))
            .unwrap()
            .detail
            .is_none());
        assert!(parse(&columns, &cells("nope", "")).is_err());
        assert!(parse(&columns, &cells("a@example.org", &"d".repeat(1001))).is_err());
        assert!(
            parse(&columns, &["a@example.org".to_owned()]).is_ok(),
            "a short row"
        );
    }
}
