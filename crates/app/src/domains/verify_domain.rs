use mailroom_domain::{sending_domain::DnsAnswers, SendingDomainId};

use super::DomainView;
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Looks the domain's records up in DNS (between two transactions: no lookup holds a
/// connection) and stores what was found. The answer is the domain after the check,
/// `verified` or `failed`; the records say which were found.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown domain.
pub fn verify_domain(
    services: &Services,
    member: &Member,
    id: SendingDomainId,
) -> Result<DomainView, AppError> {
    let account = member.account();
    let snapshot = in_transaction(services.db.as_ref(), |tx| {
        tx.find_sending_domain(account, id, false)?
            .ok_or(AppError::NotFound)
    })?;
    let dns = services.domain_dns.as_ref();
    // A failed lookup counts as "not found": the record status says so, and the check can
    // be repeated.
    let txt = |name: &str| dns.txt(name).unwrap_or_default();
    let inbound_host = services.inbound_host.as_deref();
    let answers = DnsAnswers {
        dkim: snapshot
            .selectors
            .iter()
            .map(|key| (key.selector.clone(), txt(&key.record_name(&snapshot.name))))
            .collect(),
        spf: txt(snapshot.name.as_str()),
        dmarc: txt(&snapshot.dmarc_name()),
        return_path_mx: match inbound_host {
            Some(_) => dns.mx(&snapshot.return_path_name()).unwrap_or_default(),
            None => Vec::new(),
        },
    };
    let now = services.clock.now();
    let checked = in_transaction(services.db.as_ref(), |tx| {
        // Judged on the row as it is now: a key added or removed meanwhile is kept.
        let mut domain = tx
            .find_sending_domain(account, id, true)?
            .ok_or(AppError::NotFound)?;
        domain.judge(&answers, inbound_host, now);
        tx.record_domain_check(account, &domain)?;
        Ok(domain)
    })?;
    Ok(DomainView::new(services, checked))
}
