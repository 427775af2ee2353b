//! The public side of a form, outside `/v2` and without authentication: the hosted page
//! ([`form_page`]), a post ([`submit_form`]) and the confirmation link
//! ([`confirmation_page`], [`confirm`]). The form's key names its account and the form
//! ([`mailroom_domain::form::form_key`]); the confirmation link is signed
//! ([`FormToken`]).
//!
//! What a post changes (docs/api-decisions.md, "Subscribe forms and double opt-in"):
//!
//! - **Without double opt-in**: an unknown address becomes a contact with the post's
//!   attributes. An existing contact is left alone (its attributes, the topics it left,
//!   its unsubscription from everything, the suppression list): an anonymous post proves
//!   nothing about who owns the address.
//! - **With double opt-in**: an unknown address becomes a contact marked pending (it
//!   receives nothing but the confirmation); a confirmation mail is queued (at most
//!   [`MAX_CONFIRMATIONS_PER_DAY`] per address a day). Nothing else changes until the
//!   link is followed; then the post's attributes are written, the form's topics'
//!   unsubscriptions and the unsubscription from everything are removed (with the
//!   address's `unsubscribe` entry on the suppression list: its owner asked for mail),
//!   the pending mark is cleared and `confirmed_at` set. Bounces, complaints and
//!   entries listed by hand stay: the claim goes on skipping mail to them.
//!
//! Each subscription (a confirmation; a post without double opt-in that made the contact)
//! queues `contact.subscribed`.
//!
//! Every well-formed post gets the same answer whatever the address's state, so the
//! form cannot be used to learn which addresses an account knows.

use mailroom_domain::{
    attribute::{check_type, AttributeValue},
    branding::Branding,
    email::normalize_email,
    form::{
        form_key, parse_form_key, Form, FormPost, RedirectUrl, CONFIRM_URL_VARIABLE,
        TIME_TOKEN_FIELD,
    },
    paging::PageRequest,
    suppression::SuppressionReason,
    webhook_event::{ContactChange, ContactNotice},
    AccountId, ContactId, FormConfirmationId, FormId, Timestamp,
};
use serde_json::{Map, Value};
use time::Duration;

use super::token::{unix_seconds, FormToken};
use crate::{
    contacts::write_custom_attributes,
    messages::outbox::{queued_message, sender_domain, Addressee, Origin},
    ports::{in_transaction, FormConfirmation, UnitOfWork},
    suppressions::existing_key,
    webhook_events::queue_webhook_event,
    AppError, Services,
};

/// The least time between serving the hosted page and a post from it: a person takes
/// longer to type an address.
pub const MIN_SECONDS_AFTER_PAGE: i64 = 3;
/// How long a served page may be posted from.
pub const PAGE_TOKEN_LIFETIME: Duration = Duration::hours(24);
/// How long a confirmation link works.
pub const CONFIRMATION_LIFETIME: Duration = Duration::days(7);
/// The most confirmation mails one address is sent in a day (over every form of the
/// account), so a form cannot be used to flood someone's mailbox.
pub const MAX_CONFIRMATIONS_PER_DAY: u64 = 3;

/// What the public pages show of a form and its account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormView {
    /// The account's name, as the sender people know.
    pub account_name: String,
    /// The account's branding.
    pub branding: Branding,
    /// The form.
    pub form: Form,
    /// The names of the form's topics, in the form's order.
    pub topic_names: Vec<String>,
}

/// The hosted page: the form and a fresh time token for its hidden field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormPage {
    /// What the page shows.
    pub view: FormView,
    /// The signed time token.
    pub time_token: String,
}

/// Where a post came from, which decides whether it must carry a time token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostOrigin {
    /// An HTML form (`application/x-www-form-urlencoded`): the hosted page, which
    /// always embeds the token, so one without it is refused.
    HtmlForm,
    /// A JSON post, from the account's own site or back end, which never saw the
    /// hosted page: a token is checked when present, never required.
    Json,
}

/// The answer to a post, the same for every well-formed post of a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormAnswer {
    /// What the page shows.
    pub view: FormView,
}

/// What a confirmation link finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmationState {
    /// What the page shows.
    pub view: FormView,
    /// The link was followed before: nothing more to do.
    pub already_confirmed: bool,
}

fn form_of_key(key: &str) -> Result<(AccountId, FormId), AppError> {
    parse_form_key(key).ok_or(AppError::NotFound)
}

fn load_view(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    form: FormId,
) -> Result<FormView, AppError> {
    let form = tx.find_form(account, form)?.ok_or(AppError::NotFound)?;
    let account = tx.find_account(account)?.ok_or(AppError::NotFound)?;
    let topics = tx.list_topics(
        account.id,
        PageRequest {
            start: 0,
            limit: 500,
        },
    )?;
    let topic_names = form
        .settings
        .topic_ids
        .iter()
        .filter_map(|id| topics.iter().find(|topic| topic.id == *id))
        .map(|topic| topic.name.clone())
        .collect();
    Ok(FormView {
        account_name: account.name.as_str().to_owned(),
        branding: account.branding,
        form,
        topic_names,
    })
}

/// The hosted page of the form `key` names, with a time token signed now.
///
/// # Errors
/// [`AppError::NotFound`] for a key of no form.
pub fn form_page(services: &Services, key: &str) -> Result<FormPage, AppError> {
    let (account, form) = form_of_key(key)?;
    let view = in_transaction(services.db.as_ref(), |tx| load_view(tx, account, form))?;
    let time_token = FormToken::Page {
        account,
        form,
        served: unix_seconds(services.clock.now()),
    }
    .encode(services.secrets.as_ref());
    Ok(FormPage { view, time_token })
}

/// Checks the time token of a post: signed here for this form, served at least
/// [`MIN_SECONDS_AFTER_PAGE`] and at most [`PAGE_TOKEN_LIFETIME`] ago.
fn check_time_token(
    services: &Services,
    account: AccountId,
    form: FormId,
    token: Option<&str>,
    origin: PostOrigin,
) -> Result<(), AppError> {
    let Some(token) = token else {
        return match origin {
            PostOrigin::HtmlForm => Err(AppError::BadRequest(
                "the form was not sent from its page; open the page and send it again".into(),
            )),
            PostOrigin::Json => Ok(()),
        };
    };
    let served = match FormToken::decode(token, services.secrets.as_ref()) {
        Some(FormToken::Page {
            account: of,
            form: page_form,
            served,
        }) if of == account && page_form == form => served,
        _ => {
            return Err(AppError::invalid(
                TIME_TOKEN_FIELD,
                "is not a token of this form's page; open the page and send it again",
            ))
        }
    };
    let now = unix_seconds(services.clock.now());
    let waited = now.saturating_sub(served);
    if waited < MIN_SECONDS_AFTER_PAGE {
        return Err(AppError::BadRequest(format!(
            "the form was sent {waited} s after its page was served; wait a moment and \
             send it again"
        )));
    }
    if waited > PAGE_TOKEN_LIFETIME.whole_seconds() {
        return Err(AppError::BadRequest(
            "the page was served more than a day ago; open it again and send the form".into(),
        ));
    }
    Ok(())
}

/// A post to the form `key` names (see the module's documentation for what it changes).
/// A post whose honeypot is filled is answered as any other and writes nothing.
///
/// # Errors
/// [`AppError::NotFound`] for a key of no form; [`AppError::Invalid`] naming a bad
/// field; [`AppError::BadRequest`] for a post too soon after its page, or an HTML post
/// without its page's token; [`AppError`] when the store fails.
pub fn submit_form(
    services: &Services,
    key: &str,
    post: FormPost,
    origin: PostOrigin,
) -> Result<FormAnswer, AppError> {
    let (account, form_id) = form_of_key(key)?;
    let view = in_transaction(services.db.as_ref(), |tx| load_view(tx, account, form_id))?;
    let submission = post.parse(&view.form.settings.attributes)?;
    check_time_token(
        services,
        account,
        form_id,
        submission.time_token.as_deref(),
        origin,
    )?;
    if submission.honeypot_filled {
        return Ok(FormAnswer { view });
    }
    let now = services.clock.now();
    let new_contact = ContactId::from_uuid(services.ids.next_uuid());
    let queued = in_transaction(services.db.as_ref(), |tx| {
        let form = tx.find_form(account, form_id)?.ok_or(AppError::NotFound)?;
        let (contact, created) = tx.upsert_contact(account, new_contact, &submission.email, now)?;
        if !form.settings.double_opt_in {
            // A known contact is left as it is, the topics it left included: an anonymous
            // post proves nothing about who owns the address, so only a confirmed
            // double opt-in takes an unsubscription back.
            if created {
                write_custom_attributes(tx, account, contact.id, &submission.attributes, now)?;
                subscribed(
                    tx,
                    services,
                    account,
                    form_id,
                    &contact.email,
                    contact.id,
                    now,
                )?;
            }
            return Ok(false);
        }
        if created {
            tx.mark_contact_pending(account, contact.id, now)?;
        }
        tx.prune_form_confirmations(account, contact.id, now.plus(-CONFIRMATION_LIFETIME))?;
        let sent_today =
            tx.lock_and_count_form_confirmations(account, contact.id, now.plus(-Duration::DAY))?;
        if sent_today >= MAX_CONFIRMATIONS_PER_DAY {
            // The same answer as any post: the address's owner has mail enough to act on.
            return Ok(false);
        }
        let confirmation = FormConfirmation {
            id: FormConfirmationId::from_uuid(services.ids.next_uuid()),
            form_id,
            contact_id: contact.id,
            attributes: submission
                .attributes
                .iter()
                .map(|(slug, value)| (slug.clone(), value.to_json()))
                .collect(),
            created_at: now,
            confirmed_at: None,
        };
        tx.insert_form_confirmation(account, &confirmation)?;
        let template_id = form.settings.confirmation_template_id.ok_or_else(|| {
            AppError::Internal("a double opt-in form without a confirmation template".into())
        })?;
        let template = tx
            .find_template(account, template_id)?
            .ok_or_else(|| AppError::Internal("the form's confirmation template is gone".into()))?;
        let token = FormToken::Confirm {
            account,
            confirmation: confirmation.id,
            expires: unix_seconds(now.plus(CONFIRMATION_LIFETIME)),
        }
        .encode(services.secrets.as_ref());
        let mut data: Map<String, Value> = confirmation.attributes.clone();
        data.insert(
            CONFIRM_URL_VARIABLE.to_owned(),
            Value::String(confirm_url(services, account, form_id, &token)),
        );
        let domain = sender_domain(tx, account, &template)?;
        let mut message = queued_message(
            services,
            account,
            &template,
            &domain,
            &Addressee {
                contact: contact.id,
                email: &contact.email,
            },
            Origin::Transactional,
            data,
            now,
            now,
        );
        message.form_id = Some(form_id);
        tx.insert_message(&message, None)?;
        Ok(true)
    })?;
    if queued {
        services.queue_wakeup.messages_queued();
    }
    Ok(FormAnswer { view })
}

/// The confirmation link of a confirmation.
fn confirm_url(services: &Services, account: AccountId, form: FormId, token: &str) -> String {
    format!(
        "{}/f/{}/confirm/{token}",
        services.links.public_url,
        form_key(account, form)
    )
}

/// The confirmation a link names, checked: signed here, for this form's account, not
/// expired.
fn confirmation_of(
    services: &Services,
    account: AccountId,
    token: &str,
) -> Result<FormConfirmationId, AppError> {
    match FormToken::decode(token, services.secrets.as_ref()) {
        Some(FormToken::Confirm {
            account: of,
            confirmation,
            expires,
        }) if of == account => {
            if unix_seconds(services.clock.now()) > expires {
                return Err(AppError::BadRequest(
                    "the confirmation link has expired; send the form again for a new one".into(),
                ));
            }
            Ok(confirmation)
        }
        _ => Err(AppError::NotFound),
    }
}

fn find_confirmation(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    form: FormId,
    id: FormConfirmationId,
) -> Result<FormConfirmation, AppError> {
    tx.find_form_confirmation(account, id)?
        .filter(|confirmation| confirmation.form_id == form)
        .ok_or(AppError::NotFound)
}

/// What the confirmation link's page shows; it changes nothing (mail scanners fetch
/// links), the page's button posts the confirmation.
///
/// # Errors
/// [`AppError::NotFound`] for a link not minted here or of another form;
/// [`AppError::BadRequest`] for an expired one.
pub fn confirmation_page(
    services: &Services,
    key: &str,
    token: &str,
) -> Result<ConfirmationState, AppError> {
    let (account, form) = form_of_key(key)?;
    let id = confirmation_of(services, account, token)?;
    in_transaction(services.db.as_ref(), |tx| {
        let confirmation = find_confirmation(tx, account, form, id)?;
        Ok(ConfirmationState {
            view: load_view(tx, account, form)?,
            already_confirmed: confirmation.confirmed_at.is_some(),
        })
    })
}

/// Follows a confirmation link: the post's changes are applied and the contact is
/// subscribed (see the module's documentation). A link is used once: following it
/// again changes nothing and answers `already_confirmed`.
///
/// # Errors
/// As [`confirmation_page`]; [`AppError::NotFound`] when the contact is gone.
pub fn confirm(services: &Services, key: &str, token: &str) -> Result<ConfirmationState, AppError> {
    let (account, form_id) = form_of_key(key)?;
    let id = confirmation_of(services, account, token)?;
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        let confirmation = find_confirmation(tx, account, form_id, id)?;
        let view = load_view(tx, account, form_id)?;
        if !tx.use_form_confirmation(account, id, now)? {
            return Ok(ConfirmationState {
                view,
                already_confirmed: true,
            });
        }
        let contact = tx
            .find_contact(account, confirmation.contact_id)?
            .ok_or(AppError::NotFound)?;
        apply_confirmed(
            tx,
            services,
            account,
            &view.form,
            &contact.email,
            contact.id,
            &confirmation,
            now,
        )?;
        Ok(ConfirmationState {
            view,
            already_confirmed: false,
        })
    })
}

#[allow(clippy::too_many_arguments)]
fn apply_confirmed(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
    form: &Form,
    email: &str,
    contact: ContactId,
    confirmation: &FormConfirmation,
    now: Timestamp,
) -> Result<(), AppError> {
    // The attributes as posted; one whose slug took another type since is left out
    // rather than failing the confirmation.
    let types = tx.attribute_types(account)?;
    let attributes: Vec<(String, AttributeValue)> = confirmation
        .attributes
        .iter()
        .filter(|(slug, _)| form.settings.attributes.contains(slug))
        .filter_map(|(slug, value)| {
            let value = AttributeValue::from_json(value).ok()?;
            check_type(types.get(slug).copied(), &value).ok()?;
            Some((slug.clone(), value))
        })
        .collect();
    write_custom_attributes(tx, account, contact, &attributes, now)?;
    tx.resubscribe_contact_to_topics(account, contact, &form.settings.topic_ids)?;
    if let Some(key) = existing_key(tx, services, account)? {
        tx.remove_suppressions(account, key.hash(email), &[SuppressionReason::Unsubscribe])?;
    }
    tx.clear_contact_marks(
        account,
        &normalize_email(email),
        &[SuppressionReason::Unsubscribe],
    )?;
    tx.confirm_contact(account, contact, now)?;
    subscribed(tx, services, account, form.id, email, contact, now)?;
    Ok(())
}

/// Queues `contact.subscribed` (when the account's webhook lists it) in the caller's
/// transaction.
fn subscribed(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
    form_id: FormId,
    email: &str,
    contact: ContactId,
    now: Timestamp,
) -> Result<(), AppError> {
    queue_webhook_event(
        tx,
        services,
        &ContactNotice {
            account_id: account,
            contact_id: contact,
            email: email.to_owned(),
            occurred_at: now,
            change: ContactChange::Subscribed { form_id },
        },
    )?;
    Ok(())
}

/// Where the browser goes after a confirmation, if the form says.
pub fn confirmation_redirect(state: &ConfirmationState) -> Option<&RedirectUrl> {
    state.view.form.settings.confirmation_redirect_url.as_ref()
}
