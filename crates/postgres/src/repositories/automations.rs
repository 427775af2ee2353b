use diesel::{pg::Pg, prelude::*};
use mailroom_app::{ports::AutomationRepository, StoreError};
use mailroom_domain::{
    automation::{Automation, NewAutomation, Timing, TriggerCondition},
    paging::PageRequest,
    slug::EventSlug,
    template::Template,
    AccountId, AutomationId, ContactId, TemplateId, Timestamp,
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{corrupt, templates::page_bounds, templates::TemplateRow, timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    schema::{automation_firings, automations, templates},
};

#[derive(Queryable, Selectable)]
#[diesel(table_name = automations, check_for_backend(Pg))]
struct AutomationRow {
    id: Uuid,
    name: String,
    template_id: Uuid,
    trigger_event_slug: String,
    trigger_condition: String,
    timing_condition: String,
    timing_value: Option<i32>,
    is_enabled: bool,
    created_at: OffsetDateTime,
}

impl TryFrom<AutomationRow> for Automation {
    type Error = StoreError;

    fn try_from(row: AutomationRow) -> Result<Self, StoreError> {
        let days = row
            .timing_value
            .map(|value| u16::try_from(value).map_err(|e| corrupt("automations.timing_value", e)))
            .transpose()?;
        Ok(Self {
            id: AutomationId::from_uuid(row.id),
            template_id: TemplateId::from_uuid(row.template_id),
            settings: NewAutomation {
                name: row.name,
                trigger_event_slug: EventSlug::normalize(&row.trigger_event_slug)
                    .map_err(|e| corrupt("automations.trigger_event_slug", e))?,
                trigger_condition: TriggerCondition::parse(&row.trigger_condition).ok_or_else(
                    || corrupt("automations.trigger_condition", &row.trigger_condition),
                )?,
                timing: Timing::from_parts(&row.timing_condition, days).ok_or_else(|| {
                    corrupt("automations.timing_condition", &row.timing_condition)
                })?,
                is_enabled: row.is_enabled,
            },
            created_at: timestamp(row.created_at),
        })
    }
}

fn of_account(account: AccountId) -> automations::BoxedQuery<'static, Pg> {
    automations::table
        .filter(automations::account_id.eq(account.as_uuid()))
        .into_boxed()
}

impl AutomationRepository for PgUnitOfWork<'_> {
    fn find_automation(
        &mut self,
        account: AccountId,
        id: AutomationId,
    ) -> Result<Option<Automation>, StoreError> {
        of_account(account)
            .filter(automations::id.eq(id.as_uuid()))
            .select(AutomationRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(Automation::try_from)
            .transpose()
    }

    fn list_automations(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<(Automation, Option<Template>)>, StoreError> {
        let (offset, limit) = page_bounds(page);
        let rows: Vec<(AutomationRow, Option<TemplateRow>)> = automations::table
            .left_join(
                templates::table.on(templates::account_id
                    .eq(automations::account_id)
                    .and(templates::id.eq(automations::template_id))),
            )
            .filter(automations::account_id.eq(account.as_uuid()))
            .order((automations::created_at.asc(), automations::id.asc()))
            .offset(offset)
            .limit(limit)
            .select((
                AutomationRow::as_select(),
                Option::<TemplateRow>::as_select(),
            ))
            .load(self.conn)
            .map_err(store_error)?;
        rows.into_iter()
            .map(|(automation, template)| {
                Ok((
                    Automation::try_from(automation)?,
                    template.map(Template::try_from).transpose()?,
                ))
            })
            .collect()
    }

    fn count_automations(&mut self, account: AccountId) -> Result<u64, StoreError> {
        let count: i64 = of_account(account)
            .count()
            .get_result(self.conn)
            .map_err(store_error)?;
        u64::try_from(count).map_err(|e| corrupt("automation count", e))
    }

    fn update_automation(
        &mut self,
        account: AccountId,
        id: AutomationId,
        template: TemplateId,
        settings: &NewAutomation,
    ) -> Result<bool, StoreError> {
        let updated = diesel::update(
            automations::table
                .filter(automations::account_id.eq(account.as_uuid()))
                .filter(automations::id.eq(id.as_uuid())),
        )
        .set((
            automations::name.eq(&settings.name),
            automations::template_id.eq(template.as_uuid()),
            automations::trigger_event_slug.eq(settings.trigger_event_slug.as_str()),
            automations::trigger_condition.eq(settings.trigger_condition.as_str()),
            automations::timing_condition.eq(settings.timing.condition()),
            automations::timing_value.eq(settings.timing.value().map(i32::from)),
            automations::is_enabled.eq(settings.is_enabled),
        ))
        .execute(self.conn)
        .map_err(store_error)?;
        Ok(updated == 1)
    }

    fn delete_automation(
        &mut self,
        account: AccountId,
        id: AutomationId,
    ) -> Result<Option<Automation>, StoreError> {
        diesel::delete(
            automations::table
                .filter(automations::account_id.eq(account.as_uuid()))
                .filter(automations::id.eq(id.as_uuid())),
        )
        .returning(AutomationRow::as_returning())
        .get_result(self.conn)
        .optional()
        .map_err(store_error)?
        .map(Automation::try_from)
        .transpose()
    }

    fn enabled_automations_for(
        &mut self,
        account: AccountId,
        slug: &EventSlug,
    ) -> Result<Vec<Automation>, StoreError> {
        // Served by the partial index automations_trigger_idx (enabled only).
        of_account(account)
            .filter(automations::trigger_event_slug.eq(slug.as_str()))
            .filter(automations::is_enabled.eq(true))
            .order((automations::created_at.asc(), automations::id.asc()))
            .select(AutomationRow::as_select())
            .load(self.conn)
            .map_err(store_error)?
            .into_iter()
            .map(Automation::try_from)
            .collect()
    }

    fn record_first_firing(
        &mut self,
        account: AccountId,
        automation: AutomationId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let inserted = diesel::insert_into(automation_firings::table)
            .values((
                automation_firings::account_id.eq(account.as_uuid()),
                automation_firings::automation_id.eq(automation.as_uuid()),
                automation_firings::contact_id.eq(contact.as_uuid()),
                automation_firings::fired_at.eq(now.as_datetime()),
            ))
            .on_conflict_do_nothing()
            .execute(self.conn)
            .map_err(store_error)?;
        Ok(inserted == 1)
    }
}
