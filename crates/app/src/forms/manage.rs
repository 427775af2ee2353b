//! The account's forms as the API sees them: list, count, get, create, update, delete.

use mailroom_domain::{
    form::{Form, FormInput, FormSettings, MAX_FORMS_PER_ACCOUNT},
    paging::PageRequest,
    AccountId, FormId, ValidationErrors,
};

use crate::{
    auth::Member,
    ports::{in_transaction, UnitOfWork},
    AppError, Services,
};

/// One page of the account's forms, oldest first.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_forms(
    services: &Services,
    member: &Member,
    page: PageRequest,
) -> Result<Vec<Form>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| Ok(tx.list_forms(account, page)?))
}

/// How many forms the account holds.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_forms(services: &Services, member: &Member) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| Ok(tx.count_forms(account)?))
}

/// One form of the account.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown form.
pub fn get_form(services: &Services, member: &Member, id: FormId) -> Result<Form, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        tx.find_form(account, id)?.ok_or(AppError::NotFound)
    })
}

/// Creates a form; an account holds at most [`MAX_FORMS_PER_ACCOUNT`].
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field, a topic or template that is not the
/// account's, or the bound on `name`.
pub fn create_form(
    services: &Services,
    member: &Member,
    input: FormInput,
) -> Result<Form, AppError> {
    let account = member.account();
    let settings = input.parse_new()?;
    let now = services.clock.now();
    let form = Form {
        id: FormId::from_uuid(services.ids.next_uuid()),
        settings,
        created_at: now,
        updated_at: now,
    };
    in_transaction(services.db.as_ref(), |tx| {
        check_references(tx, account, &form.settings)?;
        let held = tx.lock_and_count_forms(account)?;
        if held >= MAX_FORMS_PER_ACCOUNT {
            return Err(AppError::invalid(
                "name",
                format!(
                    "the account has {held} forms, the most it may have is \
                     {MAX_FORMS_PER_ACCOUNT}; delete one first"
                ),
            ));
        }
        tx.insert_form(account, &form)?;
        Ok(form)
    })
}

/// Partially updates a form: omitted fields are kept, `null` clears the template and the
/// redirects.
///
/// # Errors
/// [`AppError::Invalid`] for bad fields, an empty body, or double opt-in without a
/// template; [`AppError::NotFound`] for an unknown form.
pub fn update_form(
    services: &Services,
    member: &Member,
    id: FormId,
    input: FormInput,
) -> Result<Form, AppError> {
    let account = member.account();
    let patch = input.parse_patch()?;
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        let mut form = tx.find_form(account, id)?.ok_or(AppError::NotFound)?;
        patch.apply(&mut form.settings);
        form.settings.check()?;
        check_references(tx, account, &form.settings)?;
        form.updated_at = now;
        tx.update_form(account, &form)?;
        Ok(form)
    })
}

/// Deletes a form and returns it. Its confirmation links stop working; contacts it left
/// pending stay pending (they never confirmed).
///
/// # Errors
/// [`AppError::NotFound`] for an unknown form.
pub fn delete_form(services: &Services, member: &Member, id: FormId) -> Result<Form, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let form = tx.find_form(account, id)?.ok_or(AppError::NotFound)?;
        tx.delete_form(account, id)?;
        Ok(form)
    })
}

/// The topics and the template a form names must be the account's.
fn check_references(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    settings: &FormSettings,
) -> Result<(), AppError> {
    let mut errors = ValidationErrors::new();
    for (index, topic) in settings.topic_ids.iter().enumerate() {
        if tx.find_topic(account, *topic)?.is_none() {
            errors.push(
                format!("topicIds[{index}]"),
                "must be the id of a topic of this account",
            );
        }
    }
    if let Some(template) = settings.confirmation_template_id {
        if tx.find_template(account, template)?.is_none() {
            errors.push(
                "confirmationTemplateId",
                "must be the id of a template of this account",
            );
        }
    }
    errors.into_result()?;
    Ok(())
}
