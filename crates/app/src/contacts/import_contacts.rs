//! Contact import: a CSV file whose header is `email` plus custom attribute slugs, applied
//! in batches. The HTTP adapter reads the file as a stream; this module decides what each
//! row means. Each batch is one transaction, so a large file never holds one transaction
//! open for minutes, and a bad row is reported without aborting its neighbours.

use std::{
    collections::{hash_map::Entry, HashMap},
    hash::{Hash, Hasher},
};

use mailroom_domain::{
    attribute::{
        check_custom_slug, too_many_custom_attributes, AttributeSource, AttributeType,
        AttributeValue, MAX_CUSTOM_ATTRIBUTES, MAX_STRING_VALUE,
    },
    email::EmailAddress,
    AccountId, ContactId, Timestamp, ValidationErrors,
};

use crate::{
    auth::Member,
    ports::{in_transaction, ImportedContact, UnitOfWork},
    AppError, Services,
};

/// How many entries of `errors` an import reports; the counts stay exact beyond it, so a
/// file of a million bad rows cannot produce a response of a million entries.
pub const MAX_REPORTED_ERRORS: usize = 1_000;

/// The most columns a file may have (`email` included).
pub const MAX_COLUMNS: usize = 200;

/// The name of the required column.
const EMAIL_COLUMN: &str = "email";

/// How much of a bad value a rejection reason quotes.
const QUOTED_VALUE_CHARS: usize = 40;

/// An import whose header was accepted: which column holds the email and which slug each
/// other column writes. Made by [`start_import`]; every batch of the file uses it.
///
/// It also carries the types of the file's slugs as the file fixes them in file order
/// ([`ContactImport::plan_row`]): batches may be written in parallel, so the first
/// write of an untyped slug to reach the database need not be the file's first value
/// for it, yet that value must decide the type.
#[derive(Debug, Clone)]
pub struct ContactImport {
    account: AccountId,
    email_column: usize,
    /// The slug of each column; `None` for the email column.
    slugs: Vec<Option<String>>,
    /// Types of the file's slugs: stored ones when the import started, then the type of
    /// the first importable value of each other slug, in file order.
    planned: HashMap<String, AttributeType>,
}

impl ContactImport {
    /// Which of `lanes` writers working in parallel a row belongs to. Rows of one contact
    /// (the same email, case-insensitively) always share a lane, so a lane that applies
    /// its rows in file order applies every contact's rows in file order. A row without a
    /// readable email goes to lane 0, where it is rejected.
    pub fn lane(&self, row: &ImportRow, lanes: usize) -> usize {
        let email = match &row.cells {
            Ok(cells) => cells.get(self.email_column),
            Err(_) => None,
        };
        match email {
            Some(email) if lanes > 1 => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                email.to_lowercase().hash(&mut hasher);
                (hasher.finish() % lanes as u64) as usize
            }
            _ => 0,
        }
    }

    /// Notes the types that this row, read in file order, fixes: every slug still
    /// untyped gets the type of the row's value when the row would be imported (right
    /// number of cells, a valid email, every value readable). Call it for each row before
    /// its batch is handed to [`import_contacts`].
    pub fn plan_row(&mut self, row: &ImportRow) {
        if self.planned.len() == self.slugs.len() - 1 {
            return;
        }
        let Ok(cells) = &row.cells else { return };
        if cells.len() != self.slugs.len()
            || cells
                .get(self.email_column)
                .is_none_or(|email| EmailAddress::parse(email).is_err())
        {
            return;
        }
        let mut fixed = Vec::new();
        for (slug, text) in self.slugs.iter().zip(cells) {
            let Some(slug) = slug else { continue };
            if text.is_empty() {
                continue;
            }
            let planned = self.planned.get(slug).copied();
            match read_cell(text, planned) {
                Ok(value) if planned.is_none() => {
                    fixed.push((slug.clone(), value.attribute_type()))
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
        self.planned.extend(fixed);
    }
}

/// One data row as the file reader found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportRow {
    /// 1-based line of the file where the row starts (the header is line 1).
    pub line: u64,
    /// The cells, or why the reader could not split the row into cells (such as text
    /// that is not UTF-8).
    pub cells: Result<Vec<String>, String>,
}

/// A row that was not imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedRow {
    /// 1-based line of the file.
    pub line: u64,
    /// Why, for a person.
    pub reason: String,
}

/// What one batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportBatchReport {
    /// Contacts created.
    pub created: u64,
    /// Rows applied to a contact that already existed (including an earlier row of the
    /// same file with the same email).
    pub updated: u64,
    /// Rows not imported, in file order.
    pub rejected: Vec<RejectedRow>,
}

/// The running totals of a whole import: exact counts and the first
/// [`MAX_REPORTED_ERRORS`] rejections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Contacts created.
    pub created: u64,
    /// Rows applied to existing contacts.
    pub updated: u64,
    /// Rows rejected.
    pub rejected: u64,
    /// The first rejections, in file order.
    pub errors: Vec<RejectedRow>,
}

impl ImportSummary {
    /// Adds a batch's outcome.
    pub fn add(&mut self, batch: ImportBatchReport) {
        self.created += batch.created;
        self.updated += batch.updated;
        self.rejected += batch.rejected.len() as u64;
        self.keep_first_errors(batch.rejected);
    }

    /// Adds the totals of another part of the same file (rows written in parallel).
    pub fn merge(&mut self, other: ImportSummary) {
        self.created += other.created;
        self.updated += other.updated;
        self.rejected += other.rejected;
        self.keep_first_errors(other.errors);
    }

    /// Keeps the [`MAX_REPORTED_ERRORS`] rejections of the lowest lines: parts of a file
    /// written in parallel report their rows out of file order.
    fn keep_first_errors(&mut self, more: Vec<RejectedRow>) {
        if more.is_empty() {
            return;
        }
        self.errors.extend(more);
        self.errors.sort_by_key(|row| row.line);
        self.errors.truncate(MAX_REPORTED_ERRORS);
    }
}

/// Checks the caller's access and the header row of an import. Nothing is written, so a
/// bad header rejects the file before any row is applied.
///
/// # Errors
/// [`AppError::Invalid`] (field `header`) when
/// `email` is missing or repeated, or a column name is not a custom attribute slug or is
/// repeated.
pub fn start_import(
    services: &Services,
    member: &Member,
    header: &[String],
) -> Result<ContactImport, AppError> {
    let account = member.account();
    if header.len() > MAX_COLUMNS {
        return Err(AppError::invalid(
            "header",
            format!(
                "the file has {} columns; at most {MAX_COLUMNS} are accepted",
                header.len()
            ),
        ));
    }
    let (stored, custom) = in_transaction(services.db.as_ref(), |tx| {
        Ok((
            tx.attribute_types(account)?,
            tx.count_custom_attribute_metas(account)?,
        ))
    })?;
    let mut errors = ValidationErrors::new();
    let mut seen = std::collections::HashSet::with_capacity(header.len());
    let mut email_column = None;
    let mut slugs = Vec::with_capacity(header.len());
    for (index, name) in header.iter().enumerate() {
        let position = index + 1;
        if name == EMAIL_COLUMN {
            if email_column.replace(index).is_some() {
                errors.push(
                    "header",
                    format!("column {position}: 'email' appears more than once"),
                );
            }
            slugs.push(None);
            continue;
        }
        if let Err(error) = check_custom_slug(name) {
            errors.push(
                "header",
                format!("column {position} ('{}'): {error}", quoted(name)),
            );
        } else if !seen.insert(name.as_str()) {
            errors.push(
                "header",
                format!("column {position} ('{name}') appears more than once"),
            );
        }
        slugs.push(Some(name.clone()));
    }
    let Some(email_column) = email_column else {
        errors.push(
            "header",
            "the first line must name the columns, one of them 'email'",
        );
        return Err(errors.into());
    };
    errors.into_result()?;
    let new_slugs = slugs
        .iter()
        .flatten()
        .filter(|slug| !stored.contains_key(slug.as_str()))
        .count();
    if custom.saturating_add(new_slugs as u64) > MAX_CUSTOM_ATTRIBUTES {
        return Err(AppError::invalid(
            "header",
            format!(
                "the file names {new_slugs} new attributes and the account has {custom} custom \
                 attributes; it may have at most {MAX_CUSTOM_ATTRIBUTES}"
            ),
        ));
    }
    let planned = slugs
        .iter()
        .flatten()
        .filter_map(|slug| Some((slug.clone(), *stored.get(slug)?)))
        .collect();
    Ok(ContactImport {
        account,
        email_column,
        slugs,
        planned,
    })
}

/// Applies one batch of rows in one transaction: bad rows are rejected with their line
/// and reason, good ones create or update their contact. Rows with the same email are
/// applied in file order, so the later value of an attribute wins.
///
/// A cell is typed by the type already fixed for its slug when it can be read as that type
/// (a string slug stores `"123"` as text); a slug without a type yet takes the type of its
/// first importable value in the file, as [`ContactImport::plan_row`] noted it, or else of
/// its first value in this batch (`true`/`false` boolean, a finite number, an RFC 3339
/// date, else text). An empty cell writes nothing.
///
/// # Errors
/// Store failures. Bad rows are not errors.
pub fn import_contacts(
    services: &Services,
    import: &ContactImport,
    rows: Vec<ImportRow>,
) -> Result<ImportBatchReport, AppError> {
    let account = import.account;
    let now = services.clock.now();
    // Rows are checked before the transaction for everything that does not depend on the
    // stored types, so the transaction is no longer than the writes need.
    let mut rejected = Vec::new();
    let mut candidates = Vec::with_capacity(rows.len());
    for row in rows {
        match split_row(import, row) {
            Ok(candidate) => candidates.push(candidate),
            Err(rejection) => rejected.push(rejection),
        }
    }
    let new_ids: Vec<ContactId> = candidates
        .iter()
        .map(|_| ContactId::from_uuid(services.ids.next_uuid()))
        .collect();
    let written = in_transaction(services.db.as_ref(), |tx| {
        let typed = type_rows_against_store(tx, import, &candidates, now)?;
        let (contacts, rows_per_contact) = merge_by_email(typed.accepted, &new_ids);
        let created = if contacts.is_empty() {
            Vec::new()
        } else {
            tx.import_contacts(account, &contacts, now)?
        };
        let created_count = created.iter().filter(|created| **created).count() as u64;
        let applied: u64 = rows_per_contact.iter().sum();
        Ok((created_count, applied - created_count, typed.rejected))
    })?;
    let (created, updated, type_rejections) = written;
    rejected.extend(type_rejections);
    rejected.sort_by_key(|row| row.line);
    Ok(ImportBatchReport {
        created,
        updated,
        rejected,
    })
}

/// A row whose shape and email are good; its cells are not typed yet.
#[derive(Debug)]
struct Candidate {
    line: u64,
    email: EmailAddress,
    /// `(slug, text)` of the non-empty attribute cells.
    cells: Vec<(String, String)>,
}

fn split_row(import: &ContactImport, row: ImportRow) -> Result<Candidate, RejectedRow> {
    let reject = |reason: String| RejectedRow {
        line: row.line,
        reason,
    };
    let cells = match row.cells {
        Ok(cells) => cells,
        Err(reason) => return Err(reject(reason)),
    };
    if cells.iter().any(|cell| cell.contains('\0')) {
        // PostgreSQL text cannot hold U+0000.
        return Err(reject("contains the NUL character".to_owned()));
    }
    if cells.len() != import.slugs.len() {
        return Err(reject(format!(
            "has {} columns; the header has {}",
            cells.len(),
            import.slugs.len()
        )));
    }
    let email = match cells
        .get(import.email_column)
        .map(|text| EmailAddress::parse(text))
    {
        Some(Ok(email)) => email,
        Some(Err(error)) => return Err(reject(format!("email: {error}"))),
        None => return Err(reject("has no email cell".to_owned())),
    };
    let cells = import
        .slugs
        .iter()
        .zip(cells)
        .filter_map(|(slug, text)| Some((slug.clone()?, text)))
        .filter(|(_, text)| !text.is_empty())
        .collect();
    Ok(Candidate {
        line: row.line,
        email,
        cells,
    })
}

/// The rows of a batch typed against the account's attribute types.
struct TypedRows<'a> {
    accepted: Vec<(&'a EmailAddress, Vec<(String, AttributeValue)>)>,
    rejected: Vec<RejectedRow>,
    /// Slugs that had no type and were given one by a row of this batch.
    newly_fixed: Vec<(String, AttributeType)>,
}

/// Types the rows under the stored types, and the file's planned types for slugs the
/// store has no type for yet; the metas of those are then stored. A concurrent writer
/// (another import, a contact upsert) may have stored another type for such a slug first:
/// the metas store answers with its type, and the batch is typed again under it. Each
/// retry learns at least one more stored type, so the loop ends within one pass per column.
fn type_rows_against_store<'a>(
    tx: &mut dyn UnitOfWork,
    import: &ContactImport,
    candidates: &'a [Candidate],
    now: Timestamp,
) -> Result<TypedRows<'a>, AppError> {
    let mut types = tx.attribute_types(import.account)?;
    for _ in 0..=import.slugs.len() {
        let typed = type_rows(candidates, &types, &import.planned);
        if typed.newly_fixed.is_empty() {
            return Ok(typed);
        }
        let mut metas: Vec<_> = typed
            .newly_fixed
            .iter()
            .map(|(slug, kind)| (slug.clone(), *kind, AttributeSource::Custom))
            .collect();
        // In slug order, so two imports fixing the same slugs (or two lanes of one import)
        // take the metas' row locks in one order and cannot deadlock.
        metas.sort_by(|a, b| a.0.cmp(&b.0));
        let stored = tx.ensure_attribute_metas(import.account, &metas, now)?;
        // A slug left unrecorded: the account reached its custom slugs' bound after the
        // import started (its start refuses a file that would pass it).
        if let Some((slug, _, _)) = metas.iter().find(|(slug, _, _)| !stored.contains_key(slug)) {
            return Err(AppError::invalid(
                &format!("attributes.{slug}"),
                too_many_custom_attributes(),
            ));
        }
        let agreed = typed
            .newly_fixed
            .iter()
            .all(|(slug, kind)| stored.get(slug) == Some(kind));
        types.extend(stored);
        if agreed {
            return Ok(typed);
        }
    }
    Err(AppError::Internal(
        "attribute types kept changing during an import batch".into(),
    ))
}

fn type_rows<'a>(
    candidates: &'a [Candidate],
    stored: &HashMap<String, AttributeType>,
    planned: &HashMap<String, AttributeType>,
) -> TypedRows<'a> {
    let mut typed = TypedRows {
        accepted: Vec::with_capacity(candidates.len()),
        rejected: Vec::new(),
        newly_fixed: Vec::new(),
    };
    // The types fixed so far, by the store or by an earlier accepted row of this batch;
    // the file's plan decides a type the store does not have yet.
    let mut types = stored.clone();
    for candidate in candidates {
        let mut values = Vec::with_capacity(candidate.cells.len());
        let mut reasons = Vec::new();
        for (slug, text) in &candidate.cells {
            let fixed = types.get(slug).or_else(|| planned.get(slug)).copied();
            match read_cell(text, fixed) {
                Ok(value) => values.push((slug.clone(), value)),
                Err(reason) => reasons.push(format!("{slug}: {reason}")),
            }
        }
        if !reasons.is_empty() {
            typed.rejected.push(RejectedRow {
                line: candidate.line,
                reason: reasons.join("; "),
            });
            continue;
        }
        // Only an accepted row may fix a type: a rejected row writes nothing.
        for (slug, value) in &values {
            if let Entry::Vacant(entry) = types.entry(slug.clone()) {
                entry.insert(value.attribute_type());
                typed
                    .newly_fixed
                    .push((slug.clone(), value.attribute_type()));
            }
        }
        typed.accepted.push((&candidate.email, values));
    }
    typed
}

/// Reads one non-empty cell as the slug's fixed type, or infers a type for an unfixed slug.
fn read_cell(text: &str, fixed: Option<AttributeType>) -> Result<AttributeValue, String> {
    if text.chars().count() > MAX_STRING_VALUE {
        return Err(format!("is longer than {MAX_STRING_VALUE} characters"));
    }
    let boolean = || match text {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    };
    let number = || text.parse::<f64>().ok().filter(|number| number.is_finite());
    // A spreadsheet's `2026-03-01` is a date too, not text the date operators refuse.
    let date = || Timestamp::parse_timestamp_or_day(text).ok();
    let mismatch = |kind: AttributeType, expected: &str| {
        format!(
            "is a {} attribute; '{}' is not {expected}",
            kind.as_str(),
            quoted(text)
        )
    };
    match fixed {
        Some(AttributeType::String) => Ok(AttributeValue::String(text.to_owned())),
        Some(kind @ AttributeType::Number) => number()
            .map(AttributeValue::Number)
            .ok_or_else(|| mismatch(kind, "a finite number")),
        Some(kind @ AttributeType::Boolean) => boolean()
            .map(AttributeValue::Boolean)
            .ok_or_else(|| mismatch(kind, "true or false")),
        Some(kind @ AttributeType::Date) => date()
            .map(AttributeValue::Date)
            .ok_or_else(|| mismatch(kind, "an RFC 3339 date or a YYYY-MM-DD day")),
        None => Ok(boolean()
            .map(AttributeValue::Boolean)
            .or_else(|| number().map(AttributeValue::Number))
            .or_else(|| date().map(AttributeValue::Date))
            .unwrap_or_else(|| AttributeValue::String(text.to_owned()))),
    }
}

/// Folds rows with the same email (case-insensitively) into one contact, later values of
/// a slug replacing earlier ones, because one bulk upsert cannot touch a row twice.
/// Returns the contacts and how many rows each one stands for.
fn merge_by_email(
    accepted: Vec<(&EmailAddress, Vec<(String, AttributeValue)>)>,
    new_ids: &[ContactId],
) -> (Vec<ImportedContact>, Vec<u64>) {
    let mut contacts: Vec<ImportedContact> = Vec::with_capacity(accepted.len());
    let mut rows_per_contact: Vec<u64> = Vec::with_capacity(accepted.len());
    let mut index_of: HashMap<String, usize> = HashMap::with_capacity(accepted.len());
    for ((email, values), new_id) in accepted.into_iter().zip(new_ids) {
        match index_of.entry(email.normalized()) {
            Entry::Occupied(entry) => {
                let index = *entry.get();
                rows_per_contact[index] += 1;
                let merged = &mut contacts[index].values;
                for (slug, value) in values {
                    match merged.iter_mut().find(|(seen, _)| *seen == slug) {
                        Some(slot) => slot.1 = value,
                        None => merged.push((slug, value)),
                    }
                }
            }
            Entry::Vacant(entry) => {
                entry.insert(contacts.len());
                rows_per_contact.push(1);
                contacts.push(ImportedContact {
                    email: email.clone(),
                    new_id: *new_id,
                    values,
                });
            }
        }
    }
    (contacts, rows_per_contact)
}

/// The start of a client's text for an error message, so a huge cell does not make a huge
/// reason.
fn quoted(text: &str) -> String {
    if text.chars().count() <= QUOTED_VALUE_CHARS {
        text.to_owned()
    } else {
        let mut start: String = text.chars().take(QUOTED_VALUE_CHARS).collect();
        start.push('…');
        start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn import(header: &[&str]) -> ContactImport {
        let email_column = header
            .iter()
            .position(|name| *name == "email")
            .expect("email column");
        ContactImport {
            account: AccountId::parse("01936c5e-7b2a-7cde-8f00-0123456789ab").expect("id"),
            email_column,
            slugs: header
                .iter()
                .map(|name| (*name != "email").then(|| (*name).to_owned()))
                .collect(),
            planned: HashMap::new(),
        }
    }

    fn row(line: u64, cells: &[&str]) -> ImportRow {
        ImportRow {
            line,
            cells: Ok(cells.iter().map(|cell| (*cell).to_owned()).collect()),
        }
    }

    #[test]
    fn cells_take_the_fixed_type_when_they_can() {
        assert_eq!(
            read_cell("123", Some(AttributeType::String)),
            Ok(AttributeValue::String("123".into()))
        );
        assert_eq!(read_cell("123", None), Ok(AttributeValue::Number(123.0)));
        assert_eq!(read_cell("true", None), Ok(AttributeValue::Boolean(true)));
        assert_eq!(
            read_cell("TRUE", None),
            Ok(AttributeValue::String("TRUE".into()))
        );
        assert_eq!(
            read_cell("NaN", None),
            Ok(AttributeValue::String("NaN".into()))
        );
        assert_eq!(
            read_cell("2026-01-02T03:04:05Z", None).map(|v| v.attribute_type()),
            Ok(AttributeType::Date)
        );
        assert!(read_cell("abc", Some(AttributeType::Number)).is_err());
        assert!(read_cell("yes", Some(AttributeType::Boolean)).is_err());
        // A spreadsheet's day is a date, detected or fixed; another spelling is not.
        assert_eq!(
            read_cell("2026-01-02", None).map(|v| v.attribute_type()),
            Ok(AttributeType::Date)
        );
        assert!(read_cell("2026-01-02", Some(AttributeType::Date)).is_ok());
        assert!(read_cell("02/01/2026", Some(AttributeType::Date)).is_err());
        assert!(read_cell(&"x".repeat(1001), Some(AttributeType::String)).is_err());
    }

    #[test]
    fn the_first_accepted_value_fixes_an_unknown_type() {
        let import = import(&["email", "score"]);
        let candidates: Vec<Candidate> = [
            row(2, &["bad", "abc"]),
            row(3, &["a@x.io", "5"]),
            row(4, &["b@x.io", "abc"]),
        ]
        .into_iter()
        .filter_map(|row| split_row(&import, row).ok())
        .collect();
        assert_eq!(candidates.len(), 2, "line 2 has a bad email");
        let typed = type_rows(&candidates, &HashMap::new(), &HashMap::new());
        assert_eq!(
            typed.newly_fixed,
            vec![("score".to_owned(), AttributeType::Number)]
        );
        assert_eq!(typed.accepted.len(), 1);
        assert_eq!(typed.rejected.len(), 1);
        assert_eq!(typed.rejected[0].line, 4);
    }

    #[test]
    fn the_file_order_decides_types_whatever_batch_is_written_first() {
        let mut import = import(&["email", "score", "plan"]);
        let rows = [
            row(2, &["bad", "abc", "x"]),
            row(3, &["a@x.io", "5", "pro"]),
            row(4, &["b@x.io", "abc", "123"]),
            row(5, &["c@x.io", "7", "123"]),
        ];
        for row in &rows {
            import.plan_row(row);
        }
        assert_eq!(import.planned.get("score"), Some(&AttributeType::Number));
        assert_eq!(import.planned.get("plan"), Some(&AttributeType::String));
        // The last rows, written on their own before the earlier ones.
        let later: Vec<Candidate> = rows[2..]
            .iter()
            .filter_map(|row| split_row(&import, row.clone()).ok())
            .collect();
        let typed = type_rows(&later, &HashMap::new(), &import.planned);
        assert_eq!(typed.rejected.len(), 1, "'abc' is not a number");
        assert_eq!(typed.accepted.len(), 1);
        assert_eq!(
            typed.accepted[0].1,
            vec![
                ("score".to_owned(), AttributeValue::Number(7.0)),
                ("plan".to_owned(), AttributeValue::String("123".into()))
            ]
        );
        let mut fixed = typed.newly_fixed.clone();
        fixed.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            fixed,
            vec![
                ("plan".to_owned(), AttributeType::String),
                ("score".to_owned(), AttributeType::Number)
            ]
        );
    }

    #[test]
    fn wrong_shapes_and_emails_are_rejected_with_their_line() {
        let import = import(&["email", "plan"]);
        let Err(short) = split_row(&import, row(7, &["a@x.io"])) else {
            panic!("a short row is rejected");
        };
        assert_eq!(short.line, 7);
        assert!(short.reason.contains("1 columns"), "{}", short.reason);
        assert!(split_row(&import, row(8, &["nope", "pro"])).is_err());
        let unreadable = ImportRow {
            line: 9,
            cells: Err("is not valid UTF-8".into()),
        };
        assert_eq!(
            split_row(&import, unreadable).err().map(|r| r.line),
            Some(9)
        );
        let empty = split_row(&import, row(10, &["a@x.io", ""])).expect("accepted");
        assert!(empty.cells.is_empty(), "an empty cell writes nothing");
    }

    #[test]
    fn duplicate_emails_merge_in_file_order() {
        let a = EmailAddress::parse("a@x.io").expect("email");
        let a_upper = EmailAddress::parse("A@X.io").expect("email");
        let value = |n: f64| vec![("score".to_owned(), AttributeValue::Number(n))];
        let ids: Vec<ContactId> = [
            "01936c5e-7b2a-7cde-8f00-000000000001",
            "01936c5e-7b2a-7cde-8f00-000000000002",
        ]
        .iter()
        .map(|id| ContactId::parse(id).expect("id"))
        .collect();
        let (contacts, rows) = merge_by_email(vec![(&a, value(1.0)), (&a_upper, value(2.0))], &ids);
        assert_eq!(contacts.len(), 1);
        assert_eq!(rows, vec![2]);
        assert_eq!(contacts[0].email.as_str(), "a@x.io");
        assert_eq!(contacts[0].values, value(2.0));
    }

    #[test]
    fn the_summary_caps_errors_but_not_counts() {
        let mut summary = ImportSummary::default();
        // Batches may arrive out of file order when lanes write in parallel.
        for batch in [2u64, 0, 1] {
            summary.add(ImportBatchReport {
                created: 1,
                updated: 2,
                rejected: (0..600)
                    .map(|i| RejectedRow {
                        line: batch * 1000 + i,
                        reason: "x".into(),
                    })
                    .collect(),
            });
        }
        assert_eq!(
            (summary.created, summary.updated, summary.rejected),
            (3, 6, 1800)
        );
        assert_eq!(summary.errors.len(), MAX_REPORTED_ERRORS);
        assert_eq!(summary.errors[0].line, 0);
        assert_eq!(summary.errors[MAX_REPORTED_ERRORS - 1].line, 1399);
        let mut total = ImportSummary::default();
        total.merge(summary);
        assert_eq!(total.rejected, 1800);
    }

    #[test]
    fn one_contact_keeps_one_lane() {
        let import = import(&["plan", "email"]);
        let lane = |email: &str| import.lane(&row(2, &["pro", email]), 4);
        assert_eq!(lane("Ada@Example.com"), lane("ada@example.COM"));
        assert!((0..50)
            .map(|i| lane(&format!("user{i}@x.io")))
            .any(|lane| lane != 0));
        let unreadable = ImportRow {
            line: 3,
            cells: Err("x".into()),
        };
        assert_eq!(import.lane(&unreadable, 4), 0);
    }
}
