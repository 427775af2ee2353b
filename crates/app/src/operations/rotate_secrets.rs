//! `mailroom rotate-secrets`: re-seals every stored secret under the current key, so the
//! previous key (`MAILROOM_SECRET_KEY_PREVIOUS`) can be dropped afterwards.

use mailroom_domain::{DkimKeyId, FeedbackSourceId, MailServerId};

use crate::{
    accounts::webhook_slot,
    domains::dkim_key_slot,
    feedback_sources::signing_key_slot,
    mail_servers::password_slot,
    ports::{in_transaction, SealedColumn, SealedRow, SealedRowKey, SecretSlot},
    suppressions::key_slot as suppression_key_slot,
    AppError, Services,
};

/// What rotation did to one column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnRotation {
    /// The column.
    pub column: SealedColumn,
    /// Values opened (with the current or the previous key) and sealed again under the
    /// current key.
    pub resealed: u64,
    /// Values already sealed under the current key, left as they were.
    pub already_current: u64,
    /// Values changed by someone else between the read and the write; the new value was
    /// sealed under the current key by whoever wrote it, and is kept.
    pub changed_meanwhile: u64,
    /// Rows whose value opens with neither key (`account/record`), left as they were.
    pub unreadable: Vec<String>,
}

/// What rotation did, per sealed column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RotationSummary {
    /// One entry per sealed column, in [`SealedColumn::ALL`] order.
    pub columns: Vec<ColumnRotation>,
}

impl RotationSummary {
    /// Whether every stored secret now opens with the current key alone.
    pub fn complete(&self) -> bool {
        self.columns
            .iter()
            .all(|column| column.unreadable.is_empty())
    }
}

fn slot(column: SealedColumn, key: SealedRowKey) -> SecretSlot {
    match column {
        SealedColumn::MailServerPassword => password_slot(
            key.account_id,
            MailServerId::from_uuid(key.record_id.unwrap_or_default()),
        ),
        SealedColumn::WebhookSigningSecret => webhook_slot(key.account_id, "signing_secret"),
        SealedColumn::WebhookCredential => webhook_slot(key.account_id, "password_or_token"),
        SealedColumn::DkimPrivateKey => dkim_key_slot(
            key.account_id,
            DkimKeyId::from_uuid(key.record_id.unwrap_or_default()),
        ),
        SealedColumn::FeedbackSourceSigningKey => signing_key_slot(
            key.account_id,
            FeedbackSourceId::from_uuid(key.record_id.unwrap_or_default()),
        ),
        SealedColumn::SuppressionKey => suppression_key_slot(key.account_id),
    }
}

fn describe(key: SealedRowKey) -> String {
    match key.record_id {
        Some(id) => format!("{}/{id}", key.account_id),
        None => key.account_id.to_string(),
    }
}

/// Re-seals every stored secret under the current key, `batch_size` rows per
/// transaction, in key order. Idempotent: values already under the current key are left
/// alone, so a second run changes nothing, and an interrupted run can simply be repeated.
///
/// # Errors
/// [`AppError`] when the store fails; batches committed before stay re-sealed.
pub fn rotate_secrets(services: &Services, batch_size: u32) -> Result<RotationSummary, AppError> {
    let batch_size = batch_size.max(1);
    let mut columns = Vec::with_capacity(SealedColumn::ALL.len());
    for column in SealedColumn::ALL {
        let mut summary = ColumnRotation {
            column,
            resealed: 0,
            already_current: 0,
            changed_meanwhile: 0,
            unreadable: Vec::new(),
        };
        let mut after = None;
        loop {
            let (seen, last) = in_transaction(services.db.as_ref(), |tx| {
                let rows = tx.sealed_secrets_after(column, after, batch_size)?;
                for SealedRow { key, sealed } in &rows {
                    if services.secrets.sealed_under_current_key(sealed) {
                        summary.already_current += 1;
                        continue;
                    }
                    let slot = slot(column, *key);
                    let Ok(plaintext) = services.secrets.open(sealed, &slot) else {
                        summary.unreadable.push(describe(*key));
                        continue;
                    };
                    let resealed = services.secrets.seal(&plaintext, &slot);
                    if tx.replace_sealed_secret(column, *key, sealed, &resealed)? {
                        summary.resealed += 1;
                    } else {
                        summary.changed_meanwhile += 1;
                    }
                }
                Ok((rows.len(), rows.last().map(|row| row.key)))
            })?;
            after = last;
            if seen < batch_size as usize {
                break;
            }
        }
        columns.push(summary);
    }
    Ok(RotationSummary { columns })
}
