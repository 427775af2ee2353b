use mailroom_domain::{
    contact::ContactQuery,
    email::EmailAddress,
    paging::PageRequest,
    template::{Template, TemplateInput},
    TemplateId,
};
use serde_json::{Map, Value};

use super::{check_template_syntax, normalise_content, MAX_PREVIEWS_PER_ACCOUNT};
use crate::{
    auth::Member,
    messages::claim_batch::choose_server,
    ports::in_transaction,
    rendering::{
        AccountDefaults, MessageLinks, Recipient, RenderRequest, RenderedMessage, SendData,
        ServerDefaults, TemplateFields,
    },
    AppError, Services,
};

/// The address a preview renders for when the caller names none: a reserved domain
/// (RFC 2606), so it can never be a real recipient.
pub const PREVIEW_ADDRESS: &str = "preview@example.com";

/// What a preview renders for: `POST …/templates/{templateId}/preview`.
#[derive(Debug, Clone, Default)]
pub struct PreviewRequest {
    /// The recipient: with a contact of the account, its attributes as at send time;
    /// without one, only the `email` variable. `None` renders for [`PREVIEW_ADDRESS`].
    pub email: Option<EmailAddress>,
    /// Template variables, winning over the contact's attributes (as a send's `data`).
    pub data: SendData,
}

/// Renders the stored template as a send to `request.email` would, with the same layered
/// variables, sender rule and tracking defaults, through the renderer port (in the
/// server: a render child with bounded memory, never the HTTP process). Nothing is
/// stored or sent.
///
/// Differences from a send, because no message exists: `unsubscribe_url` and
/// `preferences_url` are example links to the public URL that open nothing, and links are
/// not rewritten for click tracking nor the open pixel added.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown template; [`AppError::Invalid`] naming the field
/// and line of a syntax error; [`AppError::BadRequest`] when the template fails to
/// render (unknown filter, out of fuel, too much output, out of memory), naming the
/// field, or when it runs past the preview deadline; [`AppError::TooManyAtOnce`] when the
/// account already has `MAX_PREVIEWS_PER_ACCOUNT` previews rendering;
/// [`AppError::Unavailable`] when no renderer could run.
pub fn preview_template(
    services: &Services,
    member: &Member,
    template: TemplateId,
    request: &PreviewRequest,
) -> Result<RenderedMessage, AppError> {
    let account = member.account();
    let render = in_transaction(services.db.as_ref(), |tx| {
        let found = tx
            .find_template(account, template)?
            .ok_or(AppError::NotFound)?;
        render_request(tx, services, member, &found, request)
    })?;
    render_preview(services, member, &render)
}

/// As [`preview_template`], for a draft that is not saved (the console previews what is
/// being typed): the stored template `base` with `changes` applied, or without a base a
/// new template made of `changes`. It renders as the save would store it (a visual-editor
/// template's HTML normalised); nothing is stored.
///
/// # Errors
/// As [`preview_template`]; [`AppError::Invalid`] as well for changes a save would refuse
/// (a missing field of a new template, a bad content type).
pub fn preview_draft(
    services: &Services,
    member: &Member,
    base: Option<TemplateId>,
    changes: TemplateInput,
    request: &PreviewRequest,
) -> Result<RenderedMessage, AppError> {
    let account = member.account();
    let now = services.clock.now();
    let render = in_transaction(services.db.as_ref(), |tx| {
        let mut draft = match base {
            Some(id) => {
                let mut stored = tx.find_template(account, id)?.ok_or(AppError::NotFound)?;
                changes.clone().parse_patch()?.apply(&mut stored, now);
                stored
            }
            None => changes
                .clone()
                .parse_new()?
                .into_template(TemplateId::from_uuid(services.ids.next_uuid()), now),
        };
        normalise_content(&mut draft)?;
        render_request(tx, services, member, &draft, request)
    })?;
    render_preview(services, member, &render)
}

fn render_request(
    tx: &mut dyn crate::ports::UnitOfWork,
    services: &Services,
    member: &Member,
    template: &Template,
    request: &PreviewRequest,
) -> Result<RenderRequest, AppError> {
    let account = member.account();
    // A stored template parsed when it was saved; a draft may not. Either way a syntax
    // error is the caller's 400 with the field and line, not a failed render.
    check_template_syntax(template)?;
    let record = tx.find_account(account)?.ok_or(AppError::NotFound)?;
    let server = choose_server(tx, account, template.preferred_mail_server)?;
    let email = request
        .email
        .as_ref()
        .map_or(PREVIEW_ADDRESS, EmailAddress::as_str)
        .to_owned();
    let mut attributes = Map::new();
    if request.email.is_some() {
        let query = ContactQuery {
            email: Some(email.clone()),
            ..ContactQuery::default()
        };
        let one = PageRequest { start: 0, limit: 1 };
        if let Some(contact) = tx.list_contacts(account, &query, one)?.into_iter().next() {
            attributes = crate::contacts::resolve_contact_attributes(tx, account, &contact)?
                .iter()
                .map(|(slug, value)| (slug.clone(), value.to_json()))
                .collect::<Map<String, Value>>();
        }
    }
    let example = |page: &str| Some(format!("{}/{page}/preview", services.links.public_url));
    Ok(RenderRequest {
        template: std::sync::Arc::new(TemplateFields::of(template)),
        // A preview may render a template being edited: no render child keeps it.
        template_digest: None,
        account: AccountDefaults {
            click_tracking: record.click_tracking,
            open_tracking: record.open_tracking,
        },
        server: server.map_or_else(
            || ServerDefaults {
                default_from_email: String::new(),
                default_from_name: String::new(),
            },
            |server| ServerDefaults {
                default_from_email: server.server.default_from_email,
                default_from_name: server.server.default_from_name,
            },
        ),
        recipient: Recipient { email, attributes },
        data: request.data.clone(),
        links: MessageLinks {
            unsubscribe_url: example("u"),
            preferences_url: example("p"),
        },
    })
}

fn render_preview(
    services: &Services,
    member: &Member,
    request: &RenderRequest,
) -> Result<RenderedMessage, AppError> {
    let _slot = services.previews.enter(member.account()).ok_or_else(|| {
        AppError::TooManyAtOnce(format!(
            "this account already has {MAX_PREVIEWS_PER_ACCOUNT} previews rendering; retry \
             once one has answered"
        ))
    })?;
    services
        .renderer
        .render(request)
        .map_err(|failure| match failure {
            Some(reason) => AppError::BadRequest(format!("the template does not render: {reason}")),
            None => AppError::Unavailable("no renderer is available; try again".into()),
        })
}
