use mailroom_domain::{
    sending_domain::{DnsAnswers, SendingDomain},
    SendingDomainId,
};

use super::DomainView;
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Looks the domain's records up in DNS (between two transactions, so no lookup holds a
/// connection; all at once, see [`look_up`]) and stores what was found. The answer is
/// the domain after the check, `verified` or `failed`; the records say which were found.
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
    let answers = look_up(services, &snapshot);
    let now = services.clock.now();
    let checked = in_transaction(services.db.as_ref(), |tx| {
        // Judged on the row as it is now: a key added or removed meanwhile is kept.
        let mut domain = tx
            .find_sending_domain(account, id, true)?
            .ok_or(AppError::NotFound)?;
        domain.judge(&answers, services.inbound_host.as_deref(), now);
        tx.record_domain_check(account, &domain)?;
        Ok(domain)
    })?;
    Ok(DomainView::new(services, checked))
}

/// Every lookup of the check at once, each on a thread of its own, so a check takes one
/// lookup's time (the resolver's 10 s at most) however many keys the domain holds
/// ([`mailroom_domain::sending_domain::MAX_SELECTORS`] bounds the threads). A failed
/// lookup counts as "not found": the record's status says so, and the check can be
/// repeated.
fn look_up(services: &Services, domain: &SendingDomain) -> DnsAnswers {
    let dns = services.domain_dns.as_ref();
    let txt = |name: String| move || dns.txt(&name).unwrap_or_default();
    std::thread::scope(|scope| {
        let dkim: Vec<_> = domain
            .selectors
            .iter()
            .map(|key| {
                (
                    key.selector.clone(),
                    scope.spawn(txt(key.record_name(&domain.name))),
                )
            })
            .collect();
        let spf = scope.spawn(txt(domain.name.as_str().to_owned()));
        let dmarc = scope.spawn(txt(domain.dmarc_name()));
        let return_path_name = domain.return_path_name();
        let return_path = services
            .inbound_host
            .as_ref()
            .map(|_| scope.spawn(move || dns.mx(&return_path_name).unwrap_or_default()));
        DnsAnswers {
            dkim: dkim
                .into_iter()
                .map(|(selector, lookup)| (selector, lookup.join().unwrap_or_default()))
                .collect(),
            spf: spf.join().unwrap_or_default(),
            dmarc: dmarc.join().unwrap_or_default(),
            return_path_mx: return_path
                .map(|lookup| lookup.join().unwrap_or_default())
                .unwrap_or_default(),
        }
    })
}
