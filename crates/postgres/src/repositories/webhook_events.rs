use diesel::{
    pg::{Pg, PgConnection},
    prelude::*,
};
use mailroom_app::{
    ports::{Lease, WebhookEventRepository},
    StoreError,
};
use mailroom_domain::{
    paging::PageRequest,
    webhook::{WebhookAuthType, WebhookEventType},
    webhook_event::{WebhookEvent, WebhookEventFilter, WebhookEventStatus, WebhookTarget},
    AccountId, Timestamp, UserId, WebhookEventId,
};
use serde_json::{json, Value};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{corrupt, templates::page_bounds, timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    queue::{claim_due, lock_due_lanes, reschedule_lanes, LeasedQueue},
    schema::webhook_events,
    upkeep::{bring_lanes_forward, Lanes},
};

/// `webhook_events` as a queue: queued and retrying rows wait for the delivery worker.
const WEBHOOK_QUEUE: LeasedQueue = LeasedQueue {
    table: "webhook_events",
    lanes: "webhook_lanes",
    pending: &["queued", "retrying"],
};

#[derive(Queryable, QueryableByName, Selectable, Insertable)]
#[diesel(table_name = webhook_events, check_for_backend(Pg))]
struct WebhookEventRow {
    account_id: Uuid,
    id: Uuid,
    event_type: String,
    status: String,
    payload: Value,
    target: Value,
    occurred_at: OffsetDateTime,
    try_count: i32,
    next_attempt_at: Option<OffsetDateTime>,
    locked_until: Option<OffsetDateTime>,
    lease_token: Option<Uuid>,
    last_attempt_at: Option<OffsetDateTime>,
    last_status_code: Option<i32>,
    last_error: Option<String>,
    parent_event_id: Option<Uuid>,
    retried_by_user_id: Option<Uuid>,
    created_at: OffsetDateTime,
    delivered_at: Option<OffsetDateTime>,
}

fn target_json(target: &WebhookTarget) -> Value {
    let mut object = json!({
        "url": target.url,
        "authType": target.auth_type.as_str(),
        "signingSecretSuffix": target.signing_secret_suffix,
    });
    if let Some(username) = &target.username {
        object["username"] = json!(username);
    }
    if let Some(suffix) = &target.password_or_token_suffix {
        object["passwordOrTokenSuffix"] = json!(suffix);
    }
    object
}

fn target_from_json(value: &Value) -> Result<WebhookTarget, StoreError> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let required = |key: &str| text(key).ok_or_else(|| corrupt("webhook_events.target", key));
    let auth_type = required("authType")?;
    Ok(WebhookTarget {
        url: required("url")?,
        auth_type: WebhookAuthType::parse(&auth_type)
            .ok_or_else(|| corrupt("webhook_events.target.authType", &auth_type))?,
        signing_secret_suffix: required("signingSecretSuffix")?,
        username: text("username"),
        password_or_token_suffix: text("passwordOrTokenSuffix"),
    })
}

impl TryFrom<WebhookEventRow> for WebhookEvent {
    type Error = StoreError;

    fn try_from(row: WebhookEventRow) -> Result<Self, StoreError> {
        Ok(Self {
            id: WebhookEventId::from_uuid(row.id),
            account_id: AccountId::from_uuid(row.account_id),
            event_type: WebhookEventType::parse(&row.event_type)
                .ok_or_else(|| corrupt("webhook_events.event_type", &row.event_type))?,
            status: WebhookEventStatus::parse(&row.status)
                .ok_or_else(|| corrupt("webhook_events.status", &row.status))?,
            target: target_from_json(&row.target)?,
            payload: row.payload,
            occurred_at: timestamp(row.occurred_at),
            try_count: u32::try_from(row.try_count)
                .map_err(|e| corrupt("webhook_events.try_count", e))?,
            next_attempt_at: row.next_attempt_at.map(timestamp),
            last_attempt_at: row.last_attempt_at.map(timestamp),
            last_status_code: row
                .last_status_code
                .map(u16::try_from)
                .transpose()
                .map_err(|e| corrupt("webhook_events.last_status_code", e))?,
            last_error: row.last_error,
            parent_event_id: row.parent_event_id.map(WebhookEventId::from_uuid),
            retried_by_user_id: row.retried_by_user_id.map(UserId::from_uuid),
            created_at: timestamp(row.created_at),
            delivered_at: row.delivered_at.map(timestamp),
        })
    }
}

fn event_row(event: &WebhookEvent) -> WebhookEventRow {
    WebhookEventRow {
        account_id: event.account_id.as_uuid(),
        id: event.id.as_uuid(),
        event_type: event.event_type.as_str().to_owned(),
        status: event.status.as_str().to_owned(),
        payload: event.payload.clone(),
        target: target_json(&event.target),
        occurred_at: event.occurred_at.as_datetime(),
        try_count: i32::try_from(event.try_count).unwrap_or(i32::MAX),
        next_attempt_at: event.next_attempt_at.map(|t| t.as_datetime()),
        locked_until: None,
        lease_token: None,
        last_attempt_at: event.last_attempt_at.map(|t| t.as_datetime()),
        last_status_code: event.last_status_code.map(i32::from),
        last_error: event.last_error.clone(),
        parent_event_id: event.parent_event_id.map(|id| id.as_uuid()),
        retried_by_user_id: event.retried_by_user_id.map(|id| id.as_uuid()),
        created_at: event.created_at.as_datetime(),
        delivered_at: event.delivered_at.map(|t| t.as_datetime()),
    }
}

/// Brings the account's lane forward when `event`, as just written without a lease, waits
/// for the worker (a new event, a manual retry, an attempt that will be retried).
fn bring_lane_forward_if_pending(
    conn: &mut PgConnection,
    event: &WebhookEvent,
) -> Result<(), StoreError> {
    let pending = WEBHOOK_QUEUE.pending.contains(&event.status.as_str());
    match event.next_attempt_at {
        Some(due) if pending => bring_lanes_forward(
            conn,
            Lanes::Webhook,
            [(event.account_id.as_uuid(), due.as_datetime())],
        ),
        _ => Ok(()),
    }
}

/// The account's events under `filter`, as a query to page or count.
fn filtered(
    account: AccountId,
    filter: &WebhookEventFilter,
) -> webhook_events::BoxedQuery<'static, Pg> {
    let mut query = webhook_events::table
        .filter(webhook_events::account_id.eq(account.as_uuid()))
        .into_boxed();
    if let Some(status) = filter.status {
        query = query.filter(webhook_events::status.eq(status.as_str()));
    }
    if let Some(event_type) = filter.event_type {
        query = query.filter(webhook_events::event_type.eq(event_type.as_str()));
    }
    query
}

fn events(rows: Vec<WebhookEventRow>) -> Result<Vec<WebhookEvent>, StoreError> {
    rows.into_iter().map(WebhookEvent::try_from).collect()
}

impl WebhookEventRepository for PgUnitOfWork<'_> {
    fn insert_webhook_event(&mut self, event: &WebhookEvent) -> Result<(), StoreError> {
        diesel::insert_into(webhook_events::table)
            .values(event_row(event))
            .execute(self.conn)
            .map_err(store_error)?;
        bring_lane_forward_if_pending(self.conn, event)
    }

    fn find_webhook_event(
        &mut self,
        account: AccountId,
        id: WebhookEventId,
    ) -> Result<Option<WebhookEvent>, StoreError> {
        webhook_events::table
            .find((account.as_uuid(), id.as_uuid()))
            .select(WebhookEventRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(WebhookEvent::try_from)
            .transpose()
    }

    fn list_webhook_events(
        &mut self,
        account: AccountId,
        filter: &WebhookEventFilter,
        page: PageRequest,
    ) -> Result<Vec<WebhookEvent>, StoreError> {
        let (offset, limit) = page_bounds(page);
        let rows = filtered(account, filter)
            .order((webhook_events::created_at.asc(), webhook_events::id.asc()))
            .offset(offset)
            .limit(limit)
            .select(WebhookEventRow::as_select())
            .load(self.conn)
            .map_err(store_error)?;
        events(rows)
    }

    fn count_webhook_events(
        &mut self,
        account: AccountId,
        filter: &WebhookEventFilter,
    ) -> Result<u64, StoreError> {
        filtered(account, filter)
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn lock_due_webhook_lanes(
        &mut self,
        now: Timestamp,
        limit: u32,
        skip_accounts: &[AccountId],
    ) -> Result<Vec<AccountId>, StoreError> {
        lock_due_lanes(self.conn, WEBHOOK_QUEUE.lanes, now, limit, skip_accounts)
    }

    fn claim_due_webhook_events(
        &mut self,
        account: AccountId,
        now: Timestamp,
        lease: &Lease,
        limit: u32,
    ) -> Result<Vec<WebhookEvent>, StoreError> {
        let mut rows: Vec<WebhookEventRow> = claim_due(
            self.conn,
            &WEBHOOK_QUEUE,
            account.as_uuid(),
            now.as_datetime(),
            lease.token,
            lease.until.as_datetime(),
            i64::from(limit),
        )
        .map_err(store_error)?;
        // RETURNING has no order; deliver the longest-waiting first.
        rows.sort_by_key(|row| (row.next_attempt_at, row.id));
        events(rows)
    }

    fn reschedule_webhook_lanes(
        &mut self,
        lanes: &[(AccountId, bool)],
        now: Timestamp,
    ) -> Result<(), StoreError> {
        reschedule_lanes(self.conn, &WEBHOOK_QUEUE, lanes, now)
    }

    fn record_webhook_attempt(
        &mut self,
        event: &WebhookEvent,
        lease_token: Uuid,
    ) -> Result<bool, StoreError> {
        let row = event_row(event);
        let updated = diesel::update(
            webhook_events::table
                .filter(webhook_events::account_id.eq(row.account_id))
                .filter(webhook_events::id.eq(row.id))
                .filter(webhook_events::lease_token.eq(lease_token)),
        )
        .set((
            webhook_events::status.eq(row.status),
            webhook_events::target.eq(row.target),
            webhook_events::try_count.eq(row.try_count),
            webhook_events::next_attempt_at.eq(row.next_attempt_at),
            webhook_events::last_attempt_at.eq(row.last_attempt_at),
            webhook_events::last_status_code.eq(row.last_status_code),
            webhook_events::last_error.eq(row.last_error),
            webhook_events::delivered_at.eq(row.delivered_at),
            webhook_events::locked_until.eq(None::<OffsetDateTime>),
            webhook_events::lease_token.eq(None::<Uuid>),
        ))
        .execute(self.conn)
        .map_err(store_error)?;
        if updated != 1 {
            return Ok(false);
        }
        // An attempt that will be retried waits for the worker again.
        bring_lane_forward_if_pending(self.conn, event)?;
        Ok(true)
    }
}
