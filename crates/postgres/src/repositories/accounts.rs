use diesel::{prelude::*, upsert::excluded};
use mailroom_app::{
    ports::{AccountRecord, AccountRepository, SealedSecret, StoredWebhookConfig},
    StoreError,
};
use mailroom_domain::{
    account::{AccountName, Member, Role},
    branding::{AccentColor, Branding, DisplayName, LogoUrl},
    webhook::{WebhookAuthType, WebhookEventType, WebhookUrl},
    AccountId, Timestamp, UserId,
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{corrupt, timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    schema::{accounts, memberships, users, webhook_configs},
};

#[derive(Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = accounts, check_for_backend(diesel::pg::Pg))]
struct AccountRow {
    id: Uuid,
    name: String,
    click_tracking: bool,
    open_tracking: bool,
    created_at: OffsetDateTime,
    brand_display_name: Option<String>,
    brand_logo_url: Option<String>,
    brand_accent_color: Option<String>,
    refuse_clear_text_auth: bool,
}

impl TryFrom<AccountRow> for AccountRecord {
    type Error = StoreError;

    fn try_from(row: AccountRow) -> Result<Self, StoreError> {
        Ok(Self {
            id: AccountId::from_uuid(row.id),
            name: AccountName::parse(&row.name).map_err(|e| corrupt("accounts.name", e))?,
            click_tracking: row.click_tracking,
            open_tracking: row.open_tracking,
            refuse_clear_text_auth: row.refuse_clear_text_auth,
            created_at: timestamp(row.created_at),
            branding: Branding {
                display_name: row
                    .brand_display_name
                    .map(|name| DisplayName::parse(&name))
                    .transpose()
                    .map_err(|e| corrupt("accounts.brand_display_name", e))?,
                logo_url: row
                    .brand_logo_url
                    .map(|url| LogoUrl::parse(&url))
                    .transpose()
                    .map_err(|e| corrupt("accounts.brand_logo_url", e))?,
                accent_color: row
                    .brand_accent_color
                    .map(|colour| AccentColor::parse(&colour))
                    .transpose()
                    .map_err(|e| corrupt("accounts.brand_accent_color", e))?,
            },
        })
    }
}

fn account_row(account: &AccountRecord) -> AccountRow {
    AccountRow {
        id: account.id.as_uuid(),
        name: account.name.as_str().to_owned(),
        click_tracking: account.click_tracking,
        open_tracking: account.open_tracking,
        created_at: account.created_at.as_datetime(),
        brand_display_name: brand_display_name(account),
        brand_logo_url: brand_logo_url(account),
        brand_accent_color: brand_accent_color(account),
        refuse_clear_text_auth: account.refuse_clear_text_auth,
    }
}

fn brand_display_name(account: &AccountRecord) -> Option<String> {
    account
        .branding
        .display_name
        .as_ref()
        .map(|name| name.as_str().to_owned())
}

fn brand_logo_url(account: &AccountRecord) -> Option<String> {
    account
        .branding
        .logo_url
        .as_ref()
        .map(|url| url.as_str().to_owned())
}

fn brand_accent_color(account: &AccountRecord) -> Option<String> {
    account.branding.accent_color.map(|colour| colour.to_hex())
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = webhook_configs, check_for_backend(diesel::pg::Pg))]
struct WebhookConfigRow {
    account_id: Uuid,
    url: String,
    auth_type: String,
    events: Vec<String>,
    username: Option<String>,
    password_or_token: Option<Vec<u8>>,
    signing_secret: Vec<u8>,
    updated_at: OffsetDateTime,
}

impl TryFrom<WebhookConfigRow> for StoredWebhookConfig {
    type Error = StoreError;

    fn try_from(row: WebhookConfigRow) -> Result<Self, StoreError> {
        let events = row
            .events
            .iter()
            .map(|name| {
                WebhookEventType::parse(name).ok_or_else(|| corrupt("webhook_configs.events", name))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            url: WebhookUrl::parse(&row.url).map_err(|e| corrupt("webhook_configs.url", e))?,
            auth_type: WebhookAuthType::parse(&row.auth_type)
                .ok_or_else(|| corrupt("webhook_configs.auth_type", &row.auth_type))?,
            events,
            username: row.username,
            password_or_token: row.password_or_token.map(SealedSecret),
            signing_secret: SealedSecret(row.signing_secret),
        })
    }
}

impl AccountRepository for PgUnitOfWork<'_> {
    fn insert_account(&mut self, account: &AccountRecord, owner: UserId) -> Result<(), StoreError> {
        diesel::insert_into(accounts::table)
            .values(account_row(account))
            .execute(self.conn)
            .map_err(store_error)?;
        diesel::insert_into(memberships::table)
            .values((
                memberships::account_id.eq(account.id.as_uuid()),
                memberships::user_id.eq(owner.as_uuid()),
                memberships::role.eq(Role::Owner.as_str()),
                memberships::created_at.eq(account.created_at.as_datetime()),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn lock_and_count_owned_accounts(&mut self, owner: UserId) -> Result<u64, StoreError> {
        // An advisory lock, not a row lock: `users` is a reference table on Citus, whose
        // rows every node holds, and the lock runs where the transaction runs (the
        // coordinator). It orders the creations of one owner; other owners never wait.
        crate::prepared_sql::prepared_sql(
            "SELECT pg_advisory_xact_lock(hashtextextended('account owner ' || $1::text, 0))",
        )
        .bind::<diesel::sql_types::Uuid, _>(owner.as_uuid())
        .execute(self.conn)
        .map_err(store_error)?;
        // A user's memberships are found by user, not by account: on Citus every shard.
        // Only account creation asks, which is rare; the hot paths never count accounts
        // across shards.
        let owned: i64 = crate::citus::fan_out(self.conn, |conn| {
            memberships::table
                .filter(memberships::user_id.eq(owner.as_uuid()))
                .filter(memberships::role.eq(Role::Owner.as_str()))
                .count()
                .get_result(conn)
                .map_err(store_error)
        })?;
        Ok(u64::try_from(owned).unwrap_or(0))
    }

    fn find_account(&mut self, id: AccountId) -> Result<Option<AccountRecord>, StoreError> {
        accounts::table
            .find(id.as_uuid())
            .select(AccountRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(AccountRecord::try_from)
            .transpose()
    }

    fn list_accounts_of(&mut self, user: UserId) -> Result<Vec<AccountRecord>, StoreError> {
        // A user's memberships are found by user, not by account: on Citus every shard.
        crate::citus::fan_out(self.conn, |conn| {
            accounts::table
                .inner_join(memberships::table)
                .filter(memberships::user_id.eq(user.as_uuid()))
                .order((accounts::created_at.asc(), accounts::id.asc()))
                .select(AccountRow::as_select())
                .load(conn)
                .map_err(store_error)
        })?
        .into_iter()
        .map(AccountRecord::try_from)
        .collect()
    }

    fn update_account(&mut self, account: &AccountRecord) -> Result<(), StoreError> {
        diesel::update(accounts::table.find(account.id.as_uuid()))
            .set((
                accounts::name.eq(account.name.as_str()),
                accounts::click_tracking.eq(account.click_tracking),
                accounts::open_tracking.eq(account.open_tracking),
                accounts::brand_display_name.eq(brand_display_name(account)),
                accounts::brand_logo_url.eq(brand_logo_url(account)),
                accounts::brand_accent_color.eq(brand_accent_color(account)),
                accounts::refuse_clear_text_auth.eq(account.refuse_clear_text_auth),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn member_role(
        &mut self,
        account: AccountId,
        user: UserId,
    ) -> Result<Option<Role>, StoreError> {
        memberships::table
            .find((account.as_uuid(), user.as_uuid()))
            .select(memberships::role)
            .first::<String>(self.conn)
            .optional()
            .map(|role| role.map(|role| Role::from_stored(&role)))
            .map_err(store_error)
    }

    fn list_members(&mut self, account: AccountId) -> Result<Vec<Member>, StoreError> {
        memberships::table
            .inner_join(users::table)
            .filter(memberships::account_id.eq(account.as_uuid()))
            .order((memberships::created_at.asc(), users::id.asc()))
            .select((
                users::id,
                users::email,
                memberships::role,
                memberships::created_at,
            ))
            .load::<(Uuid, String, String, OffsetDateTime)>(self.conn)
            .map(|rows| {
                rows.into_iter()
                    .map(|(id, email, role, created_at)| Member {
                        user_id: UserId::from_uuid(id),
                        email,
                        role: Role::from_stored(&role),
                        created_at: timestamp(created_at),
                    })
                    .collect()
            })
            .map_err(store_error)
    }

    fn lock_memberships(
        &mut self,
        account: AccountId,
        users: &[UserId],
    ) -> Result<Vec<(UserId, Role)>, StoreError> {
        let ids: Vec<Uuid> = users.iter().map(UserId::as_uuid).collect();
        memberships::table
            .filter(memberships::account_id.eq(account.as_uuid()))
            .filter(memberships::user_id.eq_any(ids))
            .order(memberships::user_id.asc())
            .select((memberships::user_id, memberships::role))
            .for_update()
            .load::<(Uuid, String)>(self.conn)
            .map(|rows| {
                rows.into_iter()
                    .map(|(user, role)| (UserId::from_uuid(user), Role::from_stored(&role)))
                    .collect()
            })
            .map_err(store_error)
    }

    fn insert_membership(
        &mut self,
        account: AccountId,
        user: UserId,
        role: Role,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        diesel::insert_into(memberships::table)
            .values((
                memberships::account_id.eq(account.as_uuid()),
                memberships::user_id.eq(user.as_uuid()),
                memberships::role.eq(role.as_str()),
                memberships::created_at.eq(at.as_datetime()),
            ))
            .on_conflict_do_nothing()
            .execute(self.conn)
            .map(|inserted| inserted == 1)
            .map_err(store_error)
    }

    fn set_member_role(
        &mut self,
        account: AccountId,
        user: UserId,
        role: Role,
    ) -> Result<bool, StoreError> {
        // The owner stays for the account's life: never demoted (the one statement that
        // changes a role leaves the owner's row alone), exactly one (the unique index
        // `memberships_one_owner`).
        diesel::update(
            memberships::table
                .find((account.as_uuid(), user.as_uuid()))
                .filter(memberships::role.ne(Role::Owner.as_str())),
        )
        .set(memberships::role.eq(role.as_str()))
        .execute(self.conn)
        .map(|updated| updated == 1)
        .map_err(store_error)
    }

    fn delete_membership(&mut self, account: AccountId, user: UserId) -> Result<bool, StoreError> {
        // Nor removed: the one statement that removes a member leaves the owner's row
        // alone (the account's own deletion takes it by cascade).
        diesel::delete(
            memberships::table
                .find((account.as_uuid(), user.as_uuid()))
                .filter(memberships::role.ne(Role::Owner.as_str())),
        )
        .execute(self.conn)
        .map(|deleted| deleted == 1)
        .map_err(store_error)
    }

    fn find_webhook_config(
        &mut self,
        account: AccountId,
    ) -> Result<Option<StoredWebhookConfig>, StoreError> {
        webhook_configs::table
            .find(account.as_uuid())
            .select(WebhookConfigRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(StoredWebhookConfig::try_from)
            .transpose()
    }

    fn save_webhook_config(
        &mut self,
        account: AccountId,
        config: &StoredWebhookConfig,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let row = WebhookConfigRow {
            account_id: account.as_uuid(),
            url: config.url.as_str().to_owned(),
            auth_type: config.auth_type.as_str().to_owned(),
            events: config
                .events
                .iter()
                .map(|e| e.as_str().to_owned())
                .collect(),
            username: config.username.clone(),
            password_or_token: config.password_or_token.as_ref().map(|s| s.0.clone()),
            signing_secret: config.signing_secret.0.clone(),
            updated_at: now.as_datetime(),
        };
        diesel::insert_into(webhook_configs::table)
            .values(&row)
            .on_conflict(webhook_configs::account_id)
            .do_update()
            .set((
                webhook_configs::url.eq(excluded(webhook_configs::url)),
                webhook_configs::auth_type.eq(excluded(webhook_configs::auth_type)),
                webhook_configs::events.eq(excluded(webhook_configs::events)),
                webhook_configs::username.eq(excluded(webhook_configs::username)),
                webhook_configs::password_or_token.eq(excluded(webhook_configs::password_or_token)),
                webhook_configs::signing_secret.eq(excluded(webhook_configs::signing_secret)),
                webhook_configs::updated_at.eq(excluded(webhook_configs::updated_at)),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }
}
