use diesel::prelude::*;
use mailroom_app::{ports::StarterDataRepository, StoreError};
use mailroom_domain::{automation::NewAutomation, AccountId, AutomationId, TemplateId, Timestamp};

use super::PgUnitOfWork;
use crate::{
    error::store_error,
    schema::{automations, templates, topics},
};

impl StarterDataRepository for PgUnitOfWork<'_> {
    fn insert_automation(
        &mut self,
        account: AccountId,
        id: AutomationId,
        template: TemplateId,
        automation: &NewAutomation,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        diesel::insert_into(automations::table)
            .values((
                automations::account_id.eq(account.as_uuid()),
                automations::id.eq(id.as_uuid()),
                automations::name.eq(&automation.name),
                automations::template_id.eq(template.as_uuid()),
                automations::trigger_event_slug.eq(automation.trigger_event_slug.as_str()),
                automations::trigger_condition.eq(automation.trigger_condition.as_str()),
                automations::timing_condition.eq(automation.timing.condition()),
                automations::timing_value.eq(automation.timing.value().map(i32::from)),
                automations::is_enabled.eq(automation.is_enabled),
                automations::created_at.eq(now.as_datetime()),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn count_starter_records(&mut self, account: AccountId) -> Result<(u64, u64, u64), StoreError> {
        let id = account.as_uuid();
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let templates: i64 = templates::table
            .filter(templates::account_id.eq(id))
            .count()
            .get_result(self.conn)
            .map_err(store_error)?;
        let automations: i64 = automations::table
            .filter(automations::account_id.eq(id))
            .count()
            .get_result(self.conn)
            .map_err(store_error)?;
        let topics: i64 = topics::table
            .filter(topics::account_id.eq(id))
            .count()
            .get_result(self.conn)
            .map_err(store_error)?;
        Ok((count(templates), count(automations), count(topics)))
    }
}
