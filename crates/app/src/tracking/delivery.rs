//! The delivery worker's side of links: called from `messages::deliver::prepare` in the
//! claim's transaction.

use mailroom_domain::message::{Message, MessageKind};

use super::{
    rewrite::{track_html, Rewrites},
    LinkToken,
};
use crate::{
    ports::{ListUnsubscribe, UnitOfWork},
    rendering::{MessageLinks, RenderedMessage},
    AppError, Services,
};

/// The links minted for one message before it is rendered.
pub(crate) struct MintedLinks {
    /// The `unsubscribe_url` and `preferences_url` template variables.
    pub render: MessageLinks,
    /// The `List-Unsubscribe` targets; `None` for transactional mail.
    pub list_unsubscribe: Option<ListUnsubscribe>,
}

/// Mints the message's unsubscribe links. The preferences page is the unsubscribe page
/// (one page offers both "everything" and single topics), so both variables hold the
/// same URL.
pub(crate) fn mint_links(services: &Services, message: &Message) -> MintedLinks {
    let settings = &services.links;
    let url = settings.url(
        &LinkToken::Unsubscribe {
            account: message.account_id,
            contact: message.contact_id,
            message: message.id,
        },
        services.secrets.as_ref(),
    );
    let list_unsubscribe = match message.kind {
        MessageKind::Transactional => None,
        MessageKind::Announcement | MessageKind::Automation => Some(ListUnsubscribe {
            url: url.clone(),
            mailto: settings
                .unsubscribe_mailto
                .as_ref()
                .map(|address| format!("mailto:{address}?subject=unsubscribe")),
        }),
    };
    MintedLinks {
        render: MessageLinks {
            unsubscribe_url: Some(url.clone()),
            preferences_url: Some(url),
        },
        list_unsubscribe,
    }
}

/// Applies the effective tracking flags to the rendered HTML and stores the message's
/// links (in the claim's transaction) when click tracking found any.
///
/// # Errors
/// [`AppError`] when the store fails.
pub(crate) fn apply_tracking(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    message: &Message,
    mut rendered: RenderedMessage,
) -> Result<RenderedMessage, AppError> {
    if !rendered.open_tracking && !rendered.click_tracking {
        return Ok(rendered);
    }
    let settings = &services.links;
    let secrets = services.secrets.as_ref();
    let (account, id) = (message.account_id, message.id);
    let pixel_url = rendered.open_tracking.then(|| {
        settings.url(
            &LinkToken::Open {
                account,
                message: id,
            },
            secrets,
        )
    });
    let click_url = |position: u16| {
        settings.url(
            &LinkToken::Click {
                account,
                message: id,
                position,
            },
            secrets,
        )
    };
    let own_prefix = format!("{}/", settings.public_url);
    let tracked = track_html(
        &rendered.html,
        &Rewrites {
            pixel_url: pixel_url.as_deref(),
            click_url: rendered
                .click_tracking
                .then_some(&click_url as &dyn Fn(u16) -> String),
            own_prefix: &own_prefix,
        },
    );
    if !tracked.links.is_empty() {
        tx.store_message_links(account, id, &tracked.links)?;
    }
    rendered.html = tracked.html;
    Ok(rendered)
}
