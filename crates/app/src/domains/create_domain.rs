use mailroom_domain::{
    patch::Field,
    sending_domain::{CheckStatus, DomainName, SendingDomain, MAX_DOMAINS_PER_ACCOUNT},
    SendingDomainId, ValidationErrors,
};

use super::{new_key, DomainView};
use crate::{auth::Member, ports::in_transaction, AppError, Duplicate, Services, StoreError};

/// Adds a sending domain with a fresh 2048-bit DKIM key, `pending` until verified. The
/// key is made between two transactions: the first refuses a name the account holds and
/// an account at its bound before the slow part, the second stores.
///
/// # Errors
/// [`AppError::Invalid`] naming `name` (bad, taken, or the account holds
/// [`MAX_DOMAINS_PER_ACCOUNT`] domains).
pub fn create_domain(
    services: &Services,
    member: &Member,
    name: Field<String>,
) -> Result<DomainView, AppError> {
    let account = member.account();
    let mut errors = ValidationErrors::new();
    let name = name
        .required("name", &mut errors)
        .and_then(|text| errors.collect("name", DomainName::parse(&text)));
    errors.into_result()?;
    let name = name.ok_or_else(|| AppError::invalid("name", "is required"))?;
    let admissible = |tx: &mut dyn crate::ports::UnitOfWork| -> Result<(), AppError> {
        if tx.count_sending_domains(account)? >= MAX_DOMAINS_PER_ACCOUNT {
            return Err(AppError::invalid(
                "name",
                format!("the account already holds {MAX_DOMAINS_PER_ACCOUNT} sending domains"),
            ));
        }
        Ok(())
    };
    in_transaction(services.db.as_ref(), |tx| admissible(tx))?;
    let (key, sealed) = new_key(services, account)?;
    let domain = SendingDomain {
        id: SendingDomainId::from_uuid(services.ids.next_uuid()),
        name,
        status: CheckStatus::Pending,
        selectors: vec![key.clone()],
        spf: CheckStatus::Pending,
        dmarc: CheckStatus::Pending,
        return_path: CheckStatus::Pending,
        created_at: key.created_at,
        verified_at: None,
        checked_at: None,
    };
    in_transaction(services.db.as_ref(), |tx| {
        admissible(tx)?;
        tx.insert_sending_domain(account, &domain)
            .map_err(name_taken)?;
        tx.insert_dkim_key(account, domain.id, &key, &sealed)?;
        Ok(())
    })?;
    Ok(DomainView::new(services, domain))
}

fn name_taken(error: StoreError) -> AppError {
    match error {
        StoreError::Duplicate(Duplicate::SendingDomainName) => {
            AppError::invalid("name", "is already a sending domain of this account")
        }
        other => other.into(),
    }
}
