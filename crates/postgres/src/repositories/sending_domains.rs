use std::collections::HashMap;

use diesel::prelude::*;
use mailroom_app::{
    ports::{SealedSecret, SendingDomainRepository, SigningKeyRecord},
    StoreError,
};
use mailroom_domain::{
    paging::PageRequest,
    sending_domain::{CheckStatus, DkimSelector, DomainName, SendingDomain},
    AccountId, DkimKeyId, SendingDomainId,
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{corrupt, templates::page_bounds, timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    schema::{sending_domain_keys, sending_domains},
};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = sending_domains, check_for_backend(diesel::pg::Pg))]
struct DomainRow {
    account_id: Uuid,
    id: Uuid,
    name: String,
    status: String,
    spf_status: String,
    dmarc_status: String,
    return_path_status: String,
    created_at: OffsetDateTime,
    verified_at: Option<OffsetDateTime>,
    checked_at: Option<OffsetDateTime>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = sending_domain_keys, check_for_backend(diesel::pg::Pg))]
struct KeyRow {
    account_id: Uuid,
    id: Uuid,
    domain_id: Uuid,
    selector: String,
    private_key: Vec<u8>,
    public_key: String,
    status: String,
    created_at: OffsetDateTime,
}

fn status(column: &str, text: &str) -> Result<CheckStatus, StoreError> {
    CheckStatus::parse(text).ok_or_else(|| corrupt(column, text))
}

fn key_of(row: KeyRow) -> Result<DkimSelector, StoreError> {
    Ok(DkimSelector {
        id: DkimKeyId::from_uuid(row.id),
        selector: row.selector,
        public_key: row.public_key,
        status: status("sending_domain_keys.status", &row.status)?,
        created_at: timestamp(row.created_at),
    })
}

fn domain_of(row: DomainRow, keys: Vec<DkimSelector>) -> Result<SendingDomain, StoreError> {
    Ok(SendingDomain {
        id: SendingDomainId::from_uuid(row.id),
        name: DomainName::parse(&row.name).map_err(|e| corrupt("sending_domains.name", e))?,
        status: status("sending_domains.status", &row.status)?,
        selectors: keys,
        spf: status("sending_domains.spf_status", &row.spf_status)?,
        dmarc: status("sending_domains.dmarc_status", &row.dmarc_status)?,
        return_path: status(
            "sending_domains.return_path_status",
            &row.return_path_status,
        )?,
        created_at: timestamp(row.created_at),
        verified_at: row.verified_at.map(timestamp),
        checked_at: row.checked_at.map(timestamp),
    })
}

impl PgUnitOfWork<'_> {
    /// The domains of `rows` with their keys (one query for every key), in `rows` order.
    fn with_keys(
        &mut self,
        account: AccountId,
        rows: Vec<DomainRow>,
    ) -> Result<Vec<SendingDomain>, StoreError> {
        let ids: Vec<Uuid> = rows.iter().map(|row| row.id).collect();
        let mut keys: HashMap<Uuid, Vec<DkimSelector>> = HashMap::new();
        let key_rows = sending_domain_keys::table
            .filter(sending_domain_keys::account_id.eq(account.as_uuid()))
            .filter(sending_domain_keys::domain_id.eq_any(&ids))
            .order((
                sending_domain_keys::created_at.asc(),
                sending_domain_keys::id.asc(),
            ))
            .select(KeyRow::as_select())
            .load(self.conn)
            .map_err(store_error)?;
        for row in key_rows {
            keys.entry(row.domain_id).or_default().push(key_of(row)?);
        }
        rows.into_iter()
            .map(|row| {
                let domain_keys = keys.remove(&row.id).unwrap_or_default();
                domain_of(row, domain_keys)
            })
            .collect()
    }
}

impl SendingDomainRepository for PgUnitOfWork<'_> {
    fn list_sending_domains(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<SendingDomain>, StoreError> {
        let (offset, limit) = page_bounds(page);
        let rows = sending_domains::table
            .filter(sending_domains::account_id.eq(account.as_uuid()))
            .order((sending_domains::created_at.asc(), sending_domains::id.asc()))
            .offset(offset)
            .limit(limit)
            .select(DomainRow::as_select())
            .load(self.conn)
            .map_err(store_error)?;
        self.with_keys(account, rows)
    }

    fn count_sending_domains(&mut self, account: AccountId) -> Result<u64, StoreError> {
        sending_domains::table
            .filter(sending_domains::account_id.eq(account.as_uuid()))
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn find_sending_domain(
        &mut self,
        account: AccountId,
        id: SendingDomainId,
        lock: bool,
    ) -> Result<Option<SendingDomain>, StoreError> {
        let query = sending_domains::table
            .find((account.as_uuid(), id.as_uuid()))
            .select(DomainRow::as_select());
        let row = if lock {
            query.for_update().first(self.conn)
        } else {
            query.first(self.conn)
        }
        .optional()
        .map_err(store_error)?;
        let Some(row) = row else {
            return Ok(None);
        };
        Ok(self.with_keys(account, vec![row])?.pop())
    }

    fn insert_sending_domain(
        &mut self,
        account: AccountId,
        domain: &SendingDomain,
    ) -> Result<(), StoreError> {
        diesel::insert_into(sending_domains::table)
            .values(DomainRow {
                account_id: account.as_uuid(),
                id: domain.id.as_uuid(),
                name: domain.name.as_str().to_owned(),
                status: domain.status.as_str().to_owned(),
                spf_status: domain.spf.as_str().to_owned(),
                dmarc_status: domain.dmarc.as_str().to_owned(),
                return_path_status: domain.return_path.as_str().to_owned(),
                created_at: domain.created_at.as_datetime(),
                verified_at: domain.verified_at.map(|t| t.as_datetime()),
                checked_at: domain.checked_at.map(|t| t.as_datetime()),
            })
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn insert_dkim_key(
        &mut self,
        account: AccountId,
        domain: SendingDomainId,
        key: &DkimSelector,
        private_key: &SealedSecret,
    ) -> Result<(), StoreError> {
        diesel::insert_into(sending_domain_keys::table)
            .values(KeyRow {
                account_id: account.as_uuid(),
                id: key.id.as_uuid(),
                domain_id: domain.as_uuid(),
                selector: key.selector.clone(),
                private_key: private_key.0.clone(),
                public_key: key.public_key.clone(),
                status: key.status.as_str().to_owned(),
                created_at: key.created_at.as_datetime(),
            })
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn record_domain_check(
        &mut self,
        account: AccountId,
        domain: &SendingDomain,
    ) -> Result<bool, StoreError> {
        let updated =
            diesel::update(sending_domains::table.find((account.as_uuid(), domain.id.as_uuid())))
                .set((
                    sending_domains::status.eq(domain.status.as_str()),
                    sending_domains::spf_status.eq(domain.spf.as_str()),
                    sending_domains::dmarc_status.eq(domain.dmarc.as_str()),
                    sending_domains::return_path_status.eq(domain.return_path.as_str()),
                    sending_domains::verified_at.eq(domain.verified_at.map(|t| t.as_datetime())),
                    sending_domains::checked_at.eq(domain.checked_at.map(|t| t.as_datetime())),
                ))
                .execute(self.conn)
                .map_err(store_error)?;
        for key in &domain.selectors {
            diesel::update(
                sending_domain_keys::table
                    .find((account.as_uuid(), key.id.as_uuid()))
                    .filter(sending_domain_keys::domain_id.eq(domain.id.as_uuid())),
            )
            .set(sending_domain_keys::status.eq(key.status.as_str()))
            .execute(self.conn)
            .map_err(store_error)?;
        }
        Ok(updated > 0)
    }

    fn delete_sending_domain(
        &mut self,
        account: AccountId,
        id: SendingDomainId,
    ) -> Result<bool, StoreError> {
        diesel::delete(sending_domains::table.find((account.as_uuid(), id.as_uuid())))
            .execute(self.conn)
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn delete_dkim_key(
        &mut self,
        account: AccountId,
        domain: SendingDomainId,
        key: DkimKeyId,
    ) -> Result<bool, StoreError> {
        diesel::delete(
            sending_domain_keys::table
                .find((account.as_uuid(), key.as_uuid()))
                .filter(sending_domain_keys::domain_id.eq(domain.as_uuid())),
        )
        .execute(self.conn)
        .map(|n| n > 0)
        .map_err(store_error)
    }

    fn verified_domain_names(&mut self, account: AccountId) -> Result<Vec<DomainName>, StoreError> {
        sending_domains::table
            .filter(sending_domains::account_id.eq(account.as_uuid()))
            .filter(sending_domains::status.eq(CheckStatus::Verified.as_str()))
            .order(sending_domains::name.asc())
            .select(sending_domains::name)
            .load::<String>(self.conn)
            .map_err(store_error)?
            .iter()
            .map(|name| DomainName::parse(name).map_err(|e| corrupt("sending_domains.name", e)))
            .collect()
    }

    fn return_path_accounts(
        &mut self,
        name: &DomainName,
        limit: u32,
    ) -> Result<Vec<AccountId>, StoreError> {
        // Across accounts on purpose (the account is what this finds); served by the
        // partial index `sending_domains_return_path_idx` (migration 23). The domain's own
        // status must be verified too: the return-path MX names the operator's host and is
        // the same for every account, so it proves nothing about who holds the domain,
        // while the verified DKIM record is the account's own key. Without it, any tenant
        // could add someone else's domain to accounts of its own and crowd the owner out
        // of the accounts tried.
        // On Citus a read of every shard.
        let ids = crate::citus::fan_out(self.conn, |conn| {
            sending_domains::table
                .filter(sending_domains::name.eq(name.as_str()))
                .filter(sending_domains::status.eq(CheckStatus::Verified.as_str()))
                .filter(sending_domains::return_path_status.eq(CheckStatus::Verified.as_str()))
                .order(sending_domains::account_id.asc())
                .limit(i64::from(limit))
                .select(sending_domains::account_id)
                .load::<Uuid>(conn)
                .map_err(store_error)
        })?;
        Ok(ids.into_iter().map(AccountId::from_uuid).collect())
    }

    fn signing_keys(
        &mut self,
        accounts: &[AccountId],
    ) -> Result<Vec<SigningKeyRecord>, StoreError> {
        // Newest verified key first, so the first key seen per domain is its signing key
        // (`SendingDomain::signing_selector`). One statement per account, each of one
        // account's rows (one shard on Citus).
        let mut rows = Vec::new();
        for account in accounts {
            let id = account.as_uuid();
            rows.extend(
                sending_domain_keys::table
                    .inner_join(
                        sending_domains::table.on(sending_domains::account_id
                            .eq(sending_domain_keys::account_id)
                            .and(sending_domains::id.eq(sending_domain_keys::domain_id))),
                    )
                    .filter(sending_domain_keys::account_id.eq(id))
                    .filter(sending_domains::account_id.eq(id))
                    .filter(sending_domains::status.eq(CheckStatus::Verified.as_str()))
                    .filter(sending_domain_keys::status.eq(CheckStatus::Verified.as_str()))
                    .order((
                        sending_domain_keys::domain_id.asc(),
                        sending_domain_keys::created_at.desc(),
                        sending_domain_keys::id.desc(),
                    ))
                    .select((
                        sending_domains::name,
                        sending_domains::return_path_status,
                        KeyRow::as_select(),
                    ))
                    .load::<(String, String, KeyRow)>(self.conn)
                    .map_err(store_error)?,
            );
        }
        let mut seen = std::collections::HashSet::new();
        let mut keys = Vec::new();
        for (name, return_path, row) in rows {
            if !seen.insert((row.account_id, row.domain_id)) {
                continue;
            }
            keys.push(SigningKeyRecord {
                account: AccountId::from_uuid(row.account_id),
                domain: DomainName::parse(&name).map_err(|e| corrupt("sending_domains.name", e))?,
                key_id: DkimKeyId::from_uuid(row.id),
                selector: row.selector,
                private_key: SealedSecret(row.private_key),
                return_path: return_path == CheckStatus::Verified.as_str(),
            });
        }
        Ok(keys)
    }
}
