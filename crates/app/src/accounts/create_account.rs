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
/// pinned to accounts, which could not reach the account it would create, and for a user
/// who owns [`Services::max_accounts_per_user`] accounts already.
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
        refuse_clear_text_auth: false,
        created_at: now,
        branding: Branding::default(),
    };
    let starter = starter_data();
    let ids = services.ids.as_ref();
    in_transaction(services.db.as_ref(), |tx| {
        if let Some(most) = services.max_accounts_per_user {
            let owned = tx.lock_and_count_owned_accounts(actor.user_id)?;
            if owned >= most {
                return Err(AppError::Forbidden(too_many_accounts(owned, most)));
            }
        }
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
        refuse_clear_text_auth: record.refuse_clear_text_auth,
        webhooks: None,
        branding: record.branding,
        created_at: record.created_at,
    })
}

/// Why a user may not create another account.
fn too_many_accounts(owned: u64, most: u64) -> String {
    let accounts = |n: u64| if n == 1 { "account" } else { "accounts" };
    if most == 0 {
        "this server does not let users create accounts".to_owned()
    } else {
        format!(
            "the user owns {owned} {}; this server lets a user own at most {most}",
            accounts(owned)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::too_many_accounts;

    #[test]
    fn the_refusal_names_what_the_user_owns_and_the_bound() {
        assert_eq!(
            too_many_accounts(10, 10),
            "the user owns 10 accounts; this server lets a user own at most 10"
        );
        assert_eq!(
            too_many_accounts(1, 1),
            "the user owns 1 account; this server lets a user own at most 1"
        );
        assert_eq!(
            too_many_accounts(0, 0),
            "this server does not let users create accounts"
        );
    }
}
