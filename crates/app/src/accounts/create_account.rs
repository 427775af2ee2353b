use mailroom_domain::{
    account::{Account, AccountName},
    branding::Branding,
    starter::{starter_data, WELCOME_TEMPLATE_SLUG},
    topic::Topic,
    AccountId, AutomationId, TemplateId, TopicId,
};

use crate::{
    ports::{in_transaction, AccountRecord},
    Actor, AppError, Services,
};

/// The raw body of an account creation.
#[derive(Debug, Clone, Default)]
pub struct CreateAccountRequest {
    /// `name`, required.
    pub name: Option<String>,
    /// `clickTracking`, default off.
    pub click_tracking: Option<bool>,
    /// `openTracking`, default off.
    pub open_tracking: Option<bool>,
}

/// Creates an account owned by the caller and loads the starter data (sample templates,
/// a disabled sample automation, default topics) in the same transaction: a new account
/// is either complete or absent.
///
/// # Errors
/// [`AppError::Invalid`] for a missing or bad name; [`AppError::Forbidden`] for a token
/// pinned to accounts, which could not reach the account it would create.
pub fn create_account(
    services: &Services,
    actor: &Actor,
    request: CreateAccountRequest,
) -> Result<Account, AppError> {
    if actor.account_ids.is_some() {
        return Err(AppError::Forbidden(
            "a token pinned to accounts may not create accounts".into(),
        ));
    }
    let name = match request.name.as_deref() {
        None => return Err(AppError::invalid("name", "is required")),
        Some(name) => {
            AccountName::parse(name).map_err(|e| AppError::invalid("name", e.to_string()))?
        }
    };
    let now = services.clock.now();
    let record = AccountRecord {
        id: AccountId::from_uuid(services.ids.next_uuid()),
        name,
        click_tracking: request.click_tracking.unwrap_or(false),
        open_tracking: request.open_tracking.unwrap_or(false),
        created_at: now,
        branding: Branding::default(),
    };
    let starter = starter_data();
    let ids = services.ids.as_ref();
    in_transaction(services.db.as_ref(), |tx| {
        tx.insert_account(&record, actor.user_id)?;
        let mut welcome = None;
        for template in starter.templates {
            let id = TemplateId::from_uuid(ids.next_uuid());
            if template.slug.as_str() == WELCOME_TEMPLATE_SLUG {
                welcome = Some(id);
            }
            tx.insert_template(record.id, &template.into_template(id, now))?;
        }
        let welcome = welcome
            .ok_or_else(|| AppError::Internal("starter data lacks the welcome template".into()))?;
        tx.insert_automation(
            record.id,
            AutomationId::from_uuid(ids.next_uuid()),
            welcome,
            &starter.automation,
            now,
        )?;
        for topic in starter.topics {
            let topic = Topic {
                id: TopicId::from_uuid(ids.next_uuid()),
                name: topic.name,
                description: topic.description,
                created_at: now,
            };
            tx.insert_topic(record.id, &topic)?;
        }
        Ok(())
    })?;
    Ok(Account {
        id: record.id,
        name: record.name,
        click_tracking: record.click_tracking,
        open_tracking: record.open_tracking,
        webhooks: None,
        branding: record.branding,
        created_at: record.created_at,
    })
}
