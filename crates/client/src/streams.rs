//! Every item of a paged list as a [`Stream`]: the `stream_*` methods walk `start` and
//! `limit` with the client's page size ([`crate::ClientBuilder::page_size`]), one request
//! per page, as the stream is polled.

use futures_util::stream::Stream;
use mailroom_domain::AccountId;

use crate::client::Client;
use crate::error::Result;
use crate::paging::walk;
use crate::types::*;

macro_rules! streams {
    ($(
        $(#[$meta:meta])*
        fn $name:ident($($filter:ident: $filter_ty:ty)?) -> $item:ty = $list:ident;
    )*) => {
        impl Client {$(
            $(#[$meta])*
            #[doc = concat!("\n\nEach page is one call of [`Client::", stringify!($list), "`].")]
            pub fn $name(
                &self,
                account: AccountId,
                $($filter: $filter_ty,)?
            ) -> impl Stream<Item = Result<$item>> + Send + 'static {
                let client = self.clone();
                walk(self.page_size(), move |page| {
                    let client = client.clone();
                    $(let $filter = $filter.clone();)?
                    async move { client.$list(account, $(&$filter,)? page).await }
                })
            }
        )*}
    };
}

streams! {
    /// Every template.
    fn stream_templates() -> Template = list_templates;
    /// Every mail server.
    fn stream_mail_servers() -> MailServer = list_mail_servers;
    /// Every sending domain.
    fn stream_domains() -> SendingDomain = list_domains;
    /// Every automation.
    fn stream_automations() -> AutomationListItem = list_automations;
    /// Every announcement.
    fn stream_announcements() -> Announcement = list_announcements;
    /// Every topic.
    fn stream_topics() -> Topic = list_topics;
    /// Every saved segment.
    fn stream_segments() -> Segment = list_segments;
    /// Every contact attribute.
    fn stream_attributes() -> AttributeMeta = list_attributes;
    /// Every contact matching `filter`.
    fn stream_contacts(filter: ContactFilter) -> Contact = list_contacts;
    /// Every contact of the audience `search` describes.
    fn stream_search(search: ContactSearch) -> Contact = search_contacts;
    /// Every message matching `filter`.
    fn stream_messages(filter: MessageFilter) -> Message = list_messages;
    /// Every entry of the suppression list matching `filter`.
    fn stream_suppressions(filter: SuppressionFilter) -> Suppression = list_suppressions;
    /// Every webhook event matching `filter`.
    fn stream_webhook_events(filter: WebhookEventFilter) -> WebhookEvent = list_webhook_events;
}
