//! One method per operation of the API, and [`OPERATIONS`], the table naming them.
//!
//! Both come from one macro invocation: each entry gives the HTTP method, the path as the
//! OpenAPI document spells it, whether the call may be retried, and the method, whose name
//! *is* the operation id. So the table cannot list an operation the client lacks, or miss
//! one it has; `tests/client/operations.rs` compares the table with the server's document in both
//! directions, method and path included.

use mailroom_domain::{
    AccountId, AnnouncementId, AutomationId, ContactId, FeedbackSourceId, FormId, MailServerId,
    MessageId, SegmentId, SendingDomainId, TemplateId, TokenId, TopicId, UserId, WebhookEventId,
};
use reqwest::header::LOCATION;

use crate::client::{Client, Request};
use crate::error::{Error, Result};
use crate::paging::{Page, PageRequest};
use crate::types::*;

/// One operation of the API as this client calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    /// The OpenAPI `operationId`, which is also the client method's name.
    pub id: &'static str,
    /// The HTTP method, upper case.
    pub method: &'static str,
    /// The path template, e.g. `/v2/accounts/{accountId}/templates/{templateId}`.
    pub path: &'static str,
    /// Whether a refused call (429, 503) is tried again.
    pub replay: Replay,
}

/// Whether an operation is retried after a 429 or 503 ([`crate::retry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Safe to repeat: reads, `PUT`, `DELETE`, read-only searches.
    Always,
    /// Retried only when the call carries an `Idempotency-Key`.
    WithIdempotencyKey,
}

macro_rules! operations {
    ($(
        $(#[$meta:meta])*
        $method:ident $path:literal $replay:ident;
        pub async fn $name:ident(&$self:ident $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty $body:block
    )*) => {
        /// Every operation this client calls, in the order of the API reference: its id
        /// (the method's name), HTTP method, path and retry rule.
        pub const OPERATIONS: &[Operation] = &[$(
            Operation {
                id: stringify!($name),
                method: stringify!($method),
                path: $path,
                replay: Replay::$replay,
            },
        )*];

        impl Client {$(
            $(#[$meta])*
            ///
            #[doc = concat!("Operation `", stringify!($name), "`: `", stringify!($method), " ", $path, "`.")]
            pub async fn $name(&$self $(, $arg: $ty)*) -> $ret {
                const OP: &Operation = &Operation {
                    id: stringify!($name),
                    method: stringify!($method),
                    path: $path,
                    replay: Replay::$replay,
                };
                $body
            }
        )*}
    };
}

operations! {
    // Tokens.

    /// The caller's tokens (without their secrets).
    GET "/v2/users/me/tokens" Always;
    pub async fn list_tokens(&self) -> Result<Page<Token>> {
        self.execute(OP, Request::new([])).await?.json()
    }

    /// Makes a token for the caller; the answer is the only time its secret is shown.
    POST "/v2/users/me/tokens" WithIdempotencyKey;
    pub async fn create_token(&self, token: &NewToken) -> Result<Token> {
        self.execute(OP, Request::new([]).json(token)?).await?.json()
    }

    /// Revokes one of the caller's tokens.
    DELETE "/v2/users/me/tokens/{tokenId}" Always;
    pub async fn revoke_token(&self, token: TokenId) -> Result<Token> {
        self.execute(OP, Request::new([token.to_string()])).await?.json()
    }

    // Accounts and members.

    /// Makes an account with the caller as its owner.
    POST "/v2/accounts" WithIdempotencyKey;
    pub async fn create_account(&self, account: &NewAccount) -> Result<Account> {
        self.execute(OP, Request::new([]).json(account)?).await?.json()
    }

    /// The accounts the caller belongs to (whole, in one page).
    GET "/v2/accounts" Always;
    pub async fn list_accounts(&self) -> Result<Page<Account>> {
        self.execute(OP, Request::new([])).await?.json()
    }

    /// One account.
    GET "/v2/accounts/{accountId}" Always;
    pub async fn get_account(&self, account: AccountId) -> Result<Account> {
        self.execute(OP, Request::new([account.to_string()])).await?.json()
    }

    /// Changes an account's name or tracking settings.
    PATCH "/v2/accounts/{accountId}" WithIdempotencyKey;
    pub async fn update_account(&self, account: AccountId, update: &AccountUpdate) -> Result<Account> {
        self.execute(OP, Request::new([account.to_string()]).json(update)?).await?.json()
    }

    /// The account's members (whole, in one page).
    GET "/v2/accounts/{accountId}/members" Always;
    pub async fn list_members(&self, account: AccountId) -> Result<Page<Member>> {
        self.execute(OP, Request::new([account.to_string()])).await?.json()
    }

    /// Adds a member by email (the user is created if unknown).
    POST "/v2/accounts/{accountId}/members" WithIdempotencyKey;
    pub async fn add_member(&self, account: AccountId, member: &NewMember) -> Result<Member> {
        self.execute(OP, Request::new([account.to_string()]).json(member)?).await?.json()
    }

    /// Changes a member's role.
    PATCH "/v2/accounts/{accountId}/members/{userId}" WithIdempotencyKey;
    pub async fn change_member_role(&self, account: AccountId, user: UserId, role: MemberRole) -> Result<Member> {
        let body = MemberRoleChange { role };
        self.execute(OP, Request::new([account.to_string(), user.to_string()]).json(&body)?)
            .await?
            .json()
    }

    /// Removes a member; their tokens lose the account at their next request.
    DELETE "/v2/accounts/{accountId}/members/{userId}" Always;
    pub async fn remove_member(&self, account: AccountId, user: UserId) -> Result<Member> {
        self.execute(OP, Request::new([account.to_string(), user.to_string()])).await?.json()
    }

    /// Sets the account's webhook configuration; the answer carries the signing secret
    /// whole, this once.
    PUT "/v2/accounts/{accountId}/webhooks" Always;
    pub async fn set_webhooks(&self, account: AccountId, settings: &WebhookSettings) -> Result<Webhooks> {
        self.execute(OP, Request::new([account.to_string()]).json(settings)?).await?.json()
    }

    // Webhook events.

    /// One page of the webhook event log.
    GET "/v2/accounts/{accountId}/webhook-events" Always;
    pub async fn list_webhook_events(&self, account: AccountId, filter: &WebhookEventFilter, page: PageRequest) -> Result<Page<WebhookEvent>> {
        let request = Request::new([account.to_string()]).query(filter.query()).query(page.query());
        self.execute(OP, request).await?.json()
    }

    /// How many webhook events match `filter`.
    GET "/v2/accounts/{accountId}/webhook-events/count" Always;
    pub async fn count_webhook_events(&self, account: AccountId, filter: &WebhookEventFilter) -> Result<u64> {
        let request = Request::new([account.to_string()]).query(filter.query());
        Ok(self.execute(OP, request).await?.json::<Count>()?.count)
    }

    /// One webhook event.
    GET "/v2/accounts/{accountId}/webhook-events/{eventId}" Always;
    pub async fn get_webhook_event(&self, account: AccountId, event: WebhookEventId) -> Result<WebhookEvent> {
        self.execute(OP, Request::new([account.to_string(), event.to_string()])).await?.json()
    }

    /// Queues a new delivery of a failed event.
    POST "/v2/accounts/{accountId}/webhook-events/{eventId}/retry" WithIdempotencyKey;
    pub async fn retry_webhook_event(&self, account: AccountId, event: WebhookEventId) -> Result<WebhookEvent> {
        self.execute(OP, Request::new([account.to_string(), event.to_string()])).await?.json()
    }

    // Templates.

    /// One page of templates.
    GET "/v2/accounts/{accountId}/templates" Always;
    pub async fn list_templates(&self, account: AccountId, page: PageRequest) -> Result<Page<Template>> {
        self.execute(OP, Request::new([account.to_string()]).query(page.query())).await?.json()
    }

    /// How many templates the account has.
    GET "/v2/accounts/{accountId}/templates/count" Always;
    pub async fn count_templates(&self, account: AccountId) -> Result<u64> {
        Ok(self.execute(OP, Request::new([account.to_string()])).await?.json::<Count>()?.count)
    }

    /// One template.
    GET "/v2/accounts/{accountId}/templates/{templateId}" Always;
    pub async fn get_template(&self, account: AccountId, template: TemplateId) -> Result<Template> {
        self.execute(OP, Request::new([account.to_string(), template.to_string()])).await?.json()
    }

    /// Makes a template.
    POST "/v2/accounts/{accountId}/templates" WithIdempotencyKey;
    pub async fn create_template(&self, account: AccountId, template: &NewTemplate) -> Result<Template> {
        self.execute(OP, Request::new([account.to_string()]).json(template)?).await?.json()
    }

    /// Changes some fields of a template.
    PATCH "/v2/accounts/{accountId}/templates/{templateId}" WithIdempotencyKey;
    pub async fn update_template(&self, account: AccountId, template: TemplateId, update: &TemplateUpdate) -> Result<Template> {
        let request = Request::new([account.to_string(), template.to_string()]).json(update)?;
        self.execute(OP, request).await?.json()
    }

    /// Deletes a template no automation or announcement uses.
    DELETE "/v2/accounts/{accountId}/templates/{templateId}" Always;
    pub async fn delete_template(&self, account: AccountId, template: TemplateId) -> Result<Template> {
        self.execute(OP, Request::new([account.to_string(), template.to_string()])).await?.json()
    }

    /// Renders a template as a send would (nothing is stored or sent).
    POST "/v2/accounts/{accountId}/templates/{templateId}/preview" Always;
    pub async fn preview_template(&self, account: AccountId, template: TemplateId, request: &TemplatePreviewRequest) -> Result<TemplatePreview> {
        let request = Request::new([account.to_string(), template.to_string()]).json(request)?;
        self.execute(OP, request).await?.json()
    }

    /// Queues one test send of a template, marked `test` in the message log.
    POST "/v2/accounts/{accountId}/templates/{templateId}/test-send" WithIdempotencyKey;
    pub async fn test_send_template(&self, account: AccountId, template: TemplateId, send: &TemplateTestSend) -> Result<Message> {
        let request = Request::new([account.to_string(), template.to_string()]).json(send)?;
        self.execute(OP, request).await?.json()
    }

    // Mail servers.

    /// One page of mail servers.
    GET "/v2/accounts/{accountId}/mail-servers" Always;
    pub async fn list_mail_servers(&self, account: AccountId, page: PageRequest) -> Result<Page<MailServer>> {
        self.execute(OP, Request::new([account.to_string()]).query(page.query())).await?.json()
    }

    /// How many mail servers the account has.
    GET "/v2/accounts/{accountId}/mail-servers/count" Always;
    pub async fn count_mail_servers(&self, account: AccountId) -> Result<u64> {
        Ok(self.execute(OP, Request::new([account.to_string()])).await?.json::<Count>()?.count)
    }

    /// One mail server.
    GET "/v2/accounts/{accountId}/mail-servers/{mailServerId}" Always;
    pub async fn get_mail_server(&self, account: AccountId, server: MailServerId) -> Result<MailServer> {
        self.execute(OP, Request::new([account.to_string(), server.to_string()])).await?.json()
    }

    /// Adds a mail server (the server probes it first).
    POST "/v2/accounts/{accountId}/mail-servers" WithIdempotencyKey;
    pub async fn create_mail_server(&self, account: AccountId, settings: &MailServerSettings) -> Result<MailServer> {
        self.execute(OP, Request::new([account.to_string()]).json(settings)?).await?.json()
    }

    /// Replaces a mail server's settings.
    PATCH "/v2/accounts/{accountId}/mail-servers/{mailServerId}" WithIdempotencyKey;
    pub async fn update_mail_server(&self, account: AccountId, server: MailServerId, settings: &MailServerSettings) -> Result<MailServer> {
        let request = Request::new([account.to_string(), server.to_string()]).json(settings)?;
        self.execute(OP, request).await?.json()
    }

    /// Deletes a mail server.
    DELETE "/v2/accounts/{accountId}/mail-servers/{mailServerId}" Always;
    pub async fn delete_mail_server(&self, account: AccountId, server: MailServerId) -> Result<MailServer> {
        self.execute(OP, Request::new([account.to_string(), server.to_string()])).await?.json()
    }

    // Sending domains.

    /// One page of sending domains, oldest first.
    GET "/v2/accounts/{accountId}/domains" Always;
    pub async fn list_domains(&self, account: AccountId, page: PageRequest) -> Result<Page<SendingDomain>> {
        self.execute(OP, Request::new([account.to_string()]).query(page.query())).await?.json()
    }

    /// How many sending domains the account has.
    GET "/v2/accounts/{accountId}/domains/count" Always;
    pub async fn count_domains(&self, account: AccountId) -> Result<u64> {
        Ok(self.execute(OP, Request::new([account.to_string()])).await?.json::<Count>()?.count)
    }

    /// One sending domain with its records.
    GET "/v2/accounts/{accountId}/domains/{domainId}" Always;
    pub async fn get_domain(&self, account: AccountId, domain: SendingDomainId) -> Result<SendingDomain> {
        self.execute(OP, Request::new([account.to_string(), domain.to_string()])).await?.json()
    }

    /// Adds a sending domain with a new DKIM key; its `records` say what to publish in
    /// DNS before calling `verify_domain`.
    POST "/v2/accounts/{accountId}/domains" WithIdempotencyKey;
    pub async fn create_domain(&self, account: AccountId, domain: &NewDomain) -> Result<SendingDomain> {
        self.execute(OP, Request::new([account.to_string()]).json(domain)?).await?.json()
    }

    /// Looks the domain's records up in DNS now, and answers the domain after the check.
    POST "/v2/accounts/{accountId}/domains/{domainId}/verify" WithIdempotencyKey;
    pub async fn verify_domain(&self, account: AccountId, domain: SendingDomainId) -> Result<SendingDomain> {
        self.execute(OP, Request::new([account.to_string(), domain.to_string()])).await?.json()
    }

    /// Adds a new DKIM key (pending until its record is found); the current one keeps
    /// signing until then.
    POST "/v2/accounts/{accountId}/domains/{domainId}/rotate" WithIdempotencyKey;
    pub async fn rotate_domain_key(&self, account: AccountId, domain: SendingDomainId) -> Result<SendingDomain> {
        self.execute(OP, Request::new([account.to_string(), domain.to_string()])).await?.json()
    }

    /// Removes one DKIM key of the domain (never its only one) and answers the domain.
    DELETE "/v2/accounts/{accountId}/domains/{domainId}/selectors/{selector}" Always;
    pub async fn remove_selector(&self, account: AccountId, domain: SendingDomainId, selector: &str) -> Result<SendingDomain> {
        let request = Request::new([account.to_string(), domain.to_string(), selector.to_owned()]);
        self.execute(OP, request).await?.json()
    }

    /// Deletes a sending domain and its keys.
    DELETE "/v2/accounts/{accountId}/domains/{domainId}" Always;
    pub async fn delete_domain(&self, account: AccountId, domain: SendingDomainId) -> Result<SendingDomain> {
        self.execute(OP, Request::new([account.to_string(), domain.to_string()])).await?.json()
    }

    // Automations.

    /// One page of automations, each with a summary of its template.
    GET "/v2/accounts/{accountId}/automations" Always;
    pub async fn list_automations(&self, account: AccountId, page: PageRequest) -> Result<Page<AutomationListItem>> {
        self.execute(OP, Request::new([account.to_string()]).query(page.query())).await?.json()
    }

    /// How many automations the account has.
    GET "/v2/accounts/{accountId}/automations/count" Always;
    pub async fn count_automations(&self, account: AccountId) -> Result<u64> {
        Ok(self.execute(OP, Request::new([account.to_string()])).await?.json::<Count>()?.count)
    }

    /// One automation.
    GET "/v2/accounts/{accountId}/automations/{automationId}" Always;
    pub async fn get_automation(&self, account: AccountId, automation: AutomationId) -> Result<Automation> {
        self.execute(OP, Request::new([account.to_string(), automation.to_string()])).await?.json()
    }

    /// Makes an automation.
    POST "/v2/accounts/{accountId}/automations" WithIdempotencyKey;
    pub async fn create_automation(&self, account: AccountId, settings: &AutomationSettings) -> Result<Automation> {
        self.execute(OP, Request::new([account.to_string()]).json(settings)?).await?.json()
    }

    /// Replaces an automation's settings.
    PATCH "/v2/accounts/{accountId}/automations/{automationId}" WithIdempotencyKey;
    pub async fn update_automation(&self, account: AccountId, automation: AutomationId, settings: &AutomationSettings) -> Result<Automation> {
        let request = Request::new([account.to_string(), automation.to_string()]).json(settings)?;
        self.execute(OP, request).await?.json()
    }

    /// Deletes an automation.
    DELETE "/v2/accounts/{accountId}/automations/{automationId}" Always;
    pub async fn delete_automation(&self, account: AccountId, automation: AutomationId) -> Result<Automation> {
        self.execute(OP, Request::new([account.to_string(), automation.to_string()])).await?.json()
    }

    // Announcements.

    /// One page of announcements.
    GET "/v2/accounts/{accountId}/announcements" Always;
    pub async fn list_announcements(&self, account: AccountId, page: PageRequest) -> Result<Page<Announcement>> {
        self.execute(OP, Request::new([account.to_string()]).query(page.query())).await?.json()
    }

    /// How many announcements the account has.
    GET "/v2/accounts/{accountId}/announcements/count" Always;
    pub async fn count_announcements(&self, account: AccountId) -> Result<u64> {
        Ok(self.execute(OP, Request::new([account.to_string()])).await?.json::<Count>()?.count)
    }

    /// One announcement.
    GET "/v2/accounts/{accountId}/announcements/{announcementId}" Always;
    pub async fn get_announcement(&self, account: AccountId, announcement: AnnouncementId) -> Result<Announcement> {
        self.execute(OP, Request::new([account.to_string(), announcement.to_string()])).await?.json()
    }

    /// Makes an announcement; its messages are queued in the background.
    POST "/v2/accounts/{accountId}/announcements" WithIdempotencyKey;
    pub async fn create_announcement(&self, account: AccountId, announcement: &NewAnnouncement) -> Result<Announcement> {
        self.execute(OP, Request::new([account.to_string()]).json(announcement)?).await?.json()
    }

    /// Pauses a running announcement: nothing more is expanded or claimed until resumed.
    POST "/v2/accounts/{accountId}/announcements/{announcementId}/pause" WithIdempotencyKey;
    pub async fn pause_announcement(&self, account: AccountId, announcement: AnnouncementId) -> Result<Announcement> {
        self.execute(OP, Request::new([account.to_string(), announcement.to_string()])).await?.json()
    }

    /// Resumes a paused announcement.
    POST "/v2/accounts/{accountId}/announcements/{announcementId}/resume" WithIdempotencyKey;
    pub async fn resume_announcement(&self, account: AccountId, announcement: AnnouncementId) -> Result<Announcement> {
        self.execute(OP, Request::new([account.to_string(), announcement.to_string()])).await?.json()
    }

    /// Cancels an announcement: what is not sent by now is skipped (`cancelled`).
    POST "/v2/accounts/{accountId}/announcements/{announcementId}/cancel" WithIdempotencyKey;
    pub async fn cancel_announcement(&self, account: AccountId, announcement: AnnouncementId) -> Result<Announcement> {
        self.execute(OP, Request::new([account.to_string(), announcement.to_string()])).await?.json()
    }

    // Topics.

    /// One page of topics.
    GET "/v2/accounts/{accountId}/topics" Always;
    pub async fn list_topics(&self, account: AccountId, page: PageRequest) -> Result<Page<Topic>> {
        self.execute(OP, Request::new([account.to_string()]).query(page.query())).await?.json()
    }

    /// How many topics the account has.
    GET "/v2/accounts/{accountId}/topics/count" Always;
    pub async fn count_topics(&self, account: AccountId) -> Result<u64> {
        Ok(self.execute(OP, Request::new([account.to_string()])).await?.json::<Count>()?.count)
    }

    /// One topic.
    GET "/v2/accounts/{accountId}/topics/{topicId}" Always;
    pub async fn get_topic(&self, account: AccountId, topic: TopicId) -> Result<Topic> {
        self.execute(OP, Request::new([account.to_string(), topic.to_string()])).await?.json()
    }

    /// Makes a topic.
    POST "/v2/accounts/{accountId}/topics" WithIdempotencyKey;
    pub async fn create_topic(&self, account: AccountId, topic: &NewTopic) -> Result<Topic> {
        self.execute(OP, Request::new([account.to_string()]).json(topic)?).await?.json()
    }

    /// Changes a topic.
    PATCH "/v2/accounts/{accountId}/topics/{topicId}" WithIdempotencyKey;
    pub async fn update_topic(&self, account: AccountId, topic: TopicId, update: &TopicUpdate) -> Result<Topic> {
        let request = Request::new([account.to_string(), topic.to_string()]).json(update)?;
        self.execute(OP, request).await?.json()
    }

    /// Deletes a topic.
    DELETE "/v2/accounts/{accountId}/topics/{topicId}" Always;
    pub async fn delete_topic(&self, account: AccountId, topic: TopicId) -> Result<Topic> {
        self.execute(OP, Request::new([account.to_string(), topic.to_string()])).await?.json()
    }

    // Subscribe forms.

    /// One page of subscribe forms.
    GET "/v2/accounts/{accountId}/forms" Always;
    pub async fn list_forms(&self, account: AccountId, page: PageRequest) -> Result<Page<Form>> {
        self.execute(OP, Request::new([account.to_string()]).query(page.query())).await?.json()
    }

    /// How many subscribe forms the account has.
    GET "/v2/accounts/{accountId}/forms/count" Always;
    pub async fn count_forms(&self, account: AccountId) -> Result<u64> {
        Ok(self.execute(OP, Request::new([account.to_string()])).await?.json::<Count>()?.count)
    }

    /// One subscribe form.
    GET "/v2/accounts/{accountId}/forms/{formId}" Always;
    pub async fn get_form(&self, account: AccountId, form: FormId) -> Result<Form> {
        self.execute(OP, Request::new([account.to_string(), form.to_string()])).await?.json()
    }

    /// Makes a subscribe form (at most 50 per account).
    POST "/v2/accounts/{accountId}/forms" WithIdempotencyKey;
    pub async fn create_form(&self, account: AccountId, form: &NewForm) -> Result<Form> {
        self.execute(OP, Request::new([account.to_string()]).json(form)?).await?.json()
    }

    /// Changes a subscribe form.
    PATCH "/v2/accounts/{accountId}/forms/{formId}" WithIdempotencyKey;
    pub async fn update_form(&self, account: AccountId, form: FormId, update: &FormUpdate) -> Result<Form> {
        let request = Request::new([account.to_string(), form.to_string()]).json(update)?;
        self.execute(OP, request).await?.json()
    }

    /// Deletes a subscribe form; its confirmation links stop working.
    DELETE "/v2/accounts/{accountId}/forms/{formId}" Always;
    pub async fn delete_form(&self, account: AccountId, form: FormId) -> Result<Form> {
        self.execute(OP, Request::new([account.to_string(), form.to_string()])).await?.json()
    }

    // Saved segments.

    /// One page of saved segments, oldest first.
    GET "/v2/accounts/{accountId}/segments" Always;
    pub async fn list_segments(&self, account: AccountId, page: PageRequest) -> Result<Page<Segment>> {
        self.execute(OP, Request::new([account.to_string()]).query(page.query())).await?.json()
    }

    /// How many segments the account has.
    GET "/v2/accounts/{accountId}/segments/count" Always;
    pub async fn count_segments(&self, account: AccountId) -> Result<u64> {
        Ok(self.execute(OP, Request::new([account.to_string()])).await?.json::<Count>()?.count)
    }

    /// One segment, with its definition.
    GET "/v2/accounts/{accountId}/segments/{segmentId}" Always;
    pub async fn get_segment(&self, account: AccountId, segment: SegmentId) -> Result<Segment> {
        self.execute(OP, Request::new([account.to_string(), segment.to_string()])).await?.json()
    }

    /// How many contacts are in the segment now (as `count_search` counts its definition).
    GET "/v2/accounts/{accountId}/segments/{segmentId}/count" Always;
    pub async fn count_segment_contacts(&self, account: AccountId, segment: SegmentId) -> Result<u64> {
        let request = Request::new([account.to_string(), segment.to_string()]);
        Ok(self.execute(OP, request).await?.json::<Count>()?.count)
    }

    /// Saves a segment.
    POST "/v2/accounts/{accountId}/segments" WithIdempotencyKey;
    pub async fn create_segment(&self, account: AccountId, segment: &NewSegment) -> Result<Segment> {
        self.execute(OP, Request::new([account.to_string()]).json(segment)?).await?.json()
    }

    /// Changes a segment's name or definition; announcements already made keep theirs.
    PATCH "/v2/accounts/{accountId}/segments/{segmentId}" WithIdempotencyKey;
    pub async fn update_segment(&self, account: AccountId, segment: SegmentId, update: &SegmentUpdate) -> Result<Segment> {
        let request = Request::new([account.to_string(), segment.to_string()]).json(update)?;
        self.execute(OP, request).await?.json()
    }

    /// Deletes a segment.
    DELETE "/v2/accounts/{accountId}/segments/{segmentId}" Always;
    pub async fn delete_segment(&self, account: AccountId, segment: SegmentId) -> Result<Segment> {
        self.execute(OP, Request::new([account.to_string(), segment.to_string()])).await?.json()
    }

    // Contacts.

    /// One page of contacts matching `filter`.
    GET "/v2/accounts/{accountId}/contacts" Always;
    pub async fn list_contacts(&self, account: AccountId, filter: &ContactFilter, page: PageRequest) -> Result<Page<Contact>> {
        let request = Request::new([account.to_string()]).query(filter.query()).query(page.query());
        self.execute(OP, request).await?.json()
    }

    /// How many contacts match `filter` (its order is ignored).
    GET "/v2/accounts/{accountId}/contacts/count" Always;
    pub async fn count_contacts(&self, account: AccountId, filter: &ContactFilter) -> Result<u64> {
        let request = Request::new([account.to_string()]).query(filter.query());
        Ok(self.execute(OP, request).await?.json::<Count>()?.count)
    }

    /// Creates a contact, or merges attributes into the one with that email.
    POST "/v2/accounts/{accountId}/contacts" WithIdempotencyKey;
    pub async fn upsert_contact(&self, account: AccountId, contact: &ContactUpsert) -> Result<Contact> {
        self.execute(OP, Request::new([account.to_string()]).json(contact)?).await?.json()
    }

    /// One page of the audience `search` describes (read-only, so retried like a read).
    POST "/v2/accounts/{accountId}/contacts/search" Always;
    pub async fn search_contacts(&self, account: AccountId, search: &ContactSearch, page: PageRequest) -> Result<Page<Contact>> {
        let request = Request::new([account.to_string()]).query(page.query()).json(search)?;
        self.execute(OP, request).await?.json()
    }

    /// The size of the audience `search` describes.
    POST "/v2/accounts/{accountId}/contacts/search/count" Always;
    pub async fn count_search(&self, account: AccountId, search: &ContactSearch) -> Result<u64> {
        let request = Request::new([account.to_string()]).json(search)?;
        Ok(self.execute(OP, request).await?.json::<Count>()?.count)
    }

    /// Imports contacts from CSV text (`email` column, attribute columns beside it).
    POST "/v2/accounts/{accountId}/contacts/import" WithIdempotencyKey;
    pub async fn import_contacts(&self, account: AccountId, csv: impl Into<Vec<u8>>) -> Result<ImportReport> {
        let request = Request::new([account.to_string()]).raw("text/csv", csv.into());
        self.execute(OP, request).await?.json()
    }

    /// One contact.
    GET "/v2/accounts/{accountId}/contacts/{contactId}" Always;
    pub async fn get_contact(&self, account: AccountId, contact: ContactId) -> Result<Contact> {
        self.execute(OP, Request::new([account.to_string(), contact.to_string()])).await?.json()
    }

    /// Clears a contact's hard bounce so it receives mail again.
    PATCH "/v2/accounts/{accountId}/contacts/{contactId}" WithIdempotencyKey;
    pub async fn unbounce_contact(&self, account: AccountId, contact: ContactId) -> Result<Contact> {
        let body = Unbounce { hard_bounced: false };
        let request = Request::new([account.to_string(), contact.to_string()]).json(&body)?;
        self.execute(OP, request).await?.json()
    }

    /// Deletes a contact.
    DELETE "/v2/accounts/{accountId}/contacts/{contactId}" Always;
    pub async fn delete_contact(&self, account: AccountId, contact: ContactId) -> Result<Contact> {
        self.execute(OP, Request::new([account.to_string(), contact.to_string()])).await?.json()
    }

    /// One page of a contact's events, newest first.
    GET "/v2/accounts/{accountId}/contacts/{contactId}/events" Always;
    pub async fn list_contact_events(&self, account: AccountId, contact: ContactId, page: PageRequest) -> Result<Page<ContactEvent>> {
        self.execute(OP, Request::new([account.to_string(), contact.to_string()]).query(page.query())).await?.json()
    }

    /// Everything the account keeps about one contact: attributes, suppression entries,
    /// every event and every message, as one document.
    GET "/v2/accounts/{accountId}/contacts/{contactId}/export" Always;
    pub async fn export_contact(&self, account: AccountId, contact: ContactId) -> Result<ContactExport> {
        self.execute(OP, Request::new([account.to_string(), contact.to_string()])).await?.json()
    }

    /// Records something a contact did (creating the contact if unknown); enabled
    /// automations on that event queue their messages. Not retried: a repeat is a second
    /// event.
    POST "/v2/accounts/{accountId}/events" WithIdempotencyKey;
    pub async fn record_event(&self, account: AccountId, event: &NewEvent) -> Result<ContactEvent> {
        self.execute(OP, Request::new([account.to_string()]).json(event)?).await?.json()
    }

    /// The event names seen in the account, with counts (whole, in one page).
    GET "/v2/accounts/{accountId}/events/names" Always;
    pub async fn event_names(&self, account: AccountId) -> Result<Page<EventName>> {
        self.execute(OP, Request::new([account.to_string()])).await?.json()
    }

    /// One page of the account's contact attributes.
    GET "/v2/accounts/{accountId}/attributes" Always;
    pub async fn list_attributes(&self, account: AccountId, page: PageRequest) -> Result<Page<AttributeMeta>> {
        self.execute(OP, Request::new([account.to_string()]).query(page.query())).await?.json()
    }

    /// How many contact attributes the account has.
    GET "/v2/accounts/{accountId}/attributes/count" Always;
    pub async fn count_attributes(&self, account: AccountId) -> Result<u64> {
        Ok(self.execute(OP, Request::new([account.to_string()])).await?.json::<Count>()?.count)
    }

    // Suppressions.

    /// One page of the suppression list matching `filter`.
    GET "/v2/accounts/{accountId}/suppressions" Always;
    pub async fn list_suppressions(&self, account: AccountId, filter: &SuppressionFilter, page: PageRequest) -> Result<Page<Suppression>> {
        let request = Request::new([account.to_string()]).query(filter.query()).query(page.query());
        self.execute(OP, request).await?.json()
    }

    /// How many entries of the suppression list match `filter`.
    GET "/v2/accounts/{accountId}/suppressions/count" Always;
    pub async fn count_suppressions(&self, account: AccountId, filter: &SuppressionFilter) -> Result<u64> {
        let request = Request::new([account.to_string()]).query(filter.query());
        Ok(self.execute(OP, request).await?.json::<Count>()?.count)
    }

    /// Lists an address by hand; mail to it is skipped as `suppressed`.
    POST "/v2/accounts/{accountId}/suppressions" WithIdempotencyKey;
    pub async fn add_suppression(&self, account: AccountId, suppression: &NewSuppression) -> Result<Suppression> {
        self.execute(OP, Request::new([account.to_string()]).json(suppression)?).await?.json()
    }

    /// Takes an address off the list, for `filter.reason` or for every reason
    /// (`filter.email` is required).
    DELETE "/v2/accounts/{accountId}/suppressions" Always;
    pub async fn remove_suppressions(&self, account: AccountId, filter: &SuppressionFilter) -> Result<RemovedSuppressions> {
        self.execute(OP, Request::new([account.to_string()]).query(filter.query())).await?.json()
    }

    /// Lists addresses by hand from CSV text (`email` column, optionally `detail`).
    POST "/v2/accounts/{accountId}/suppressions/import" WithIdempotencyKey;
    pub async fn import_suppressions(&self, account: AccountId, csv: impl Into<Vec<u8>>) -> Result<SuppressionImportReport> {
        let request = Request::new([account.to_string()]).raw("text/csv", csv.into());
        self.execute(OP, request).await?.json()
    }

    /// The whole suppression list as CSV text.
    GET "/v2/accounts/{accountId}/suppressions/export" Always;
    pub async fn export_suppressions(&self, account: AccountId) -> Result<String> {
        self.execute(OP, Request::new([account.to_string()])).await?.text()
    }

    // System.

    /// The OpenAPI 3.1 document of the API.
    GET "/v2/openapi.json" Always;
    pub async fn openapi_json(&self) -> Result<serde_json::Value> {
        self.execute(OP, Request::new([])).await?.json()
    }

    /// Liveness: the process answers.
    GET "/healthz" Always;
    pub async fn healthz(&self) -> Result<Health> {
        self.execute(OP, Request::new([])).await?.json()
    }

    /// Readiness: the database answers (503 while it does not). A 503 is retried like
    /// any read; a probe that wants the first answer uses
    /// `client.with_retry(RetryPolicy::NONE)`.
    GET "/readyz" Always;
    pub async fn readyz(&self) -> Result<Health> {
        self.execute(OP, Request::new([])).await?.json()
    }

    /// The Prometheus exposition (404 when the server serves it on its own listener).
    GET "/metrics" Always;
    pub async fn metrics(&self) -> Result<String> {
        self.execute(OP, Request::new([])).await?.text()
    }

    // Messages.

    /// Queues one transactional message. The `Idempotency-Key` is `idempotency_key`, or a
    /// fresh UUID when `None`: with a key the call is retried after a 429 or 503 without
    /// any risk of a second email, since the server answers a repeated key with the first
    /// message. Pass your own key (an order id, say) to make your own retries safe too.
    POST "/v2/accounts/{accountId}/messages" WithIdempotencyKey;
    pub async fn send_message(&self, account: AccountId, message: &SendMessage, idempotency_key: Option<&str>) -> Result<Message> {
        let key = idempotency_key.map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_owned);
        if key.is_empty() || reqwest::header::HeaderValue::from_str(&key).is_err() {
            return Err(Error::InvalidRequest("the idempotency key is empty or not header-safe".into()));
        }
        let request = Request::new([account.to_string()]).json(message)?.idempotency_key(key);
        self.execute(OP, request).await?.json()
    }

    /// One page of messages matching `filter`.
    GET "/v2/accounts/{accountId}/messages" Always;
    pub async fn list_messages(&self, account: AccountId, filter: &MessageFilter, page: PageRequest) -> Result<Page<Message>> {
        let request = Request::new([account.to_string()]).query(filter.list_query()).query(page.query());
        self.execute(OP, request).await?.json()
    }

    /// How many messages match `filter`.
    GET "/v2/accounts/{accountId}/messages/count" Always;
    pub async fn count_messages(&self, account: AccountId, filter: &MessageFilter) -> Result<u64> {
        let request = Request::new([account.to_string()]).query(filter.query());
        Ok(self.execute(OP, request).await?.json::<Count>()?.count)
    }

    /// Daily counters of the last days, oldest first, today last.
    GET "/v2/accounts/{accountId}/messages/stats" Always;
    pub async fn message_stats(&self, account: AccountId) -> Result<Vec<DailyStats>> {
        self.execute(OP, Request::new([account.to_string()])).await?.json()
    }

    /// One message.
    GET "/v2/accounts/{accountId}/messages/{messageId}" Always;
    pub async fn get_message(&self, account: AccountId, message: MessageId) -> Result<Message> {
        self.execute(OP, Request::new([account.to_string(), message.to_string()])).await?.json()
    }

    /// Cancels a message that still waits for a worker (a `send_at` send, a retry): it
    /// becomes `skipped` with reason `cancelled`.
    POST "/v2/accounts/{accountId}/messages/{messageId}/cancel" WithIdempotencyKey;
    pub async fn cancel_message(&self, account: AccountId, message: MessageId) -> Result<Message> {
        self.execute(OP, Request::new([account.to_string(), message.to_string()])).await?.json()
    }

    /// Cancels the message the send with `idempotency_key` queued, as `cancel_message`.
    POST "/v2/accounts/{accountId}/messages/cancel" WithIdempotencyKey;
    pub async fn cancel_message_by_key(&self, account: AccountId, idempotency_key: &str) -> Result<Message> {
        let body = serde_json::json!({ "idempotencyKey": idempotency_key });
        self.execute(OP, Request::new([account.to_string()]).json(&body)?).await?.json()
    }

    /// Hands in a bounce (DSN) or complaint (ARF) report, the raw `message/rfc822` text.
    POST "/v2/accounts/{accountId}/feedback" WithIdempotencyKey;
    pub async fn record_feedback(&self, account: AccountId, report: impl Into<Vec<u8>>) -> Result<Feedback> {
        let request = Request::new([account.to_string()]).raw("message/rfc822", report.into());
        self.execute(OP, request).await?.json()
    }

    // Feedback sources (providers' bounce and complaint webhooks).

    /// The account's feedback sources.
    GET "/v2/accounts/{accountId}/feedback-sources" Always;
    pub async fn list_feedback_sources(&self, account: AccountId) -> Result<FeedbackSourceList> {
        self.execute(OP, Request::new([account.to_string()])).await?.json()
    }

    /// One feedback source.
    GET "/v2/accounts/{accountId}/feedback-sources/{sourceId}" Always;
    pub async fn get_feedback_source(&self, account: AccountId, source: FeedbackSourceId) -> Result<FeedbackSource> {
        self.execute(OP, Request::new([account.to_string(), source.to_string()])).await?.json()
    }

    /// Makes a feedback source; for Postmark the answer carries the generated secret,
    /// this once.
    POST "/v2/accounts/{accountId}/feedback-sources" WithIdempotencyKey;
    pub async fn create_feedback_source(&self, account: AccountId, source: &NewFeedbackSource) -> Result<FeedbackSource> {
        self.execute(OP, Request::new([account.to_string()]).json(source)?).await?.json()
    }

    /// Deletes a feedback source.
    DELETE "/v2/accounts/{accountId}/feedback-sources/{sourceId}" Always;
    pub async fn delete_feedback_source(&self, account: AccountId, source: FeedbackSourceId) -> Result<FeedbackSource> {
        self.execute(OP, Request::new([account.to_string(), source.to_string()])).await?.json()
    }

    /// Posts a provider's JSON payload to a source, as the provider does (for replaying
    /// a payload captured elsewhere; the provider's own signature must be in it, since
    /// the route reads no token).
    POST "/v2/feedback-sources/{accountId}/{sourceId}/events" WithIdempotencyKey;
    pub async fn receive_provider_events(&self, account: AccountId, source: FeedbackSourceId, payload: impl Into<Vec<u8>>) -> Result<ProviderEvents> {
        let request = Request::new([account.to_string(), source.to_string()])
            .raw("application/json", payload.into());
        self.execute(OP, request).await?.json()
    }

    // Public links (no token needed; the link's signed token is the credential).

    /// Records an open and returns the tracking pixel (a GIF).
    GET "/t/o/{token}" Always;
    pub async fn open_pixel(&self, token: &str) -> Result<Vec<u8>> {
        Ok(self.execute(OP, Request::new([token.to_owned()])).await?.body)
    }

    /// Records a click and returns where the link leads (the redirect is not followed).
    GET "/t/c/{token}" Always;
    pub async fn follow_link(&self, token: &str) -> Result<String> {
        let answer = self.execute(OP, Request::new([token.to_owned()])).await?;
        answer
            .headers
            .get(LOCATION)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .ok_or(Error::Decode { operation: OP.id, reason: format!("status {} without a Location", answer.status) })
    }

    /// The unsubscribe page (HTML).
    GET "/u/{token}" Always;
    pub async fn unsubscribe_page(&self, token: &str) -> Result<String> {
        self.execute(OP, Request::new([token.to_owned()])).await?.text()
    }

    /// Posts the unsubscribe form (or a one-click unsubscription) and returns the page
    /// shown after it (HTML).
    POST "/u/{token}" WithIdempotencyKey;
    pub async fn unsubscribe_post(&self, token: &str, form: &UnsubscribeForm) -> Result<String> {
        let request = Request::new([token.to_owned()])
            .raw("application/x-www-form-urlencoded", form.encode().into_bytes());
        self.execute(OP, request).await?.text()
    }

    /// A subscribe form's hosted page (HTML), by the form's `form_key`.
    GET "/f/{formKey}" Always;
    pub async fn form_page(&self, form_key: &str) -> Result<String> {
        self.execute(OP, Request::new([form_key.to_owned()])).await?.text()
    }

    /// Posts to a subscribe form as the account's own site would: `fields` holds
    /// `email` and the form's attributes by slug. The answer is the same whatever the
    /// address.
    POST "/f/{formKey}" WithIdempotencyKey;
    pub async fn submit_form(&self, form_key: &str, fields: &serde_json::Map<String, serde_json::Value>) -> Result<FormPostAnswer> {
        self.execute(OP, Request::new([form_key.to_owned()]).json(fields)?).await?.json()
    }

    /// The page of a form's confirmation link (HTML); it changes nothing.
    GET "/f/{formKey}/confirm/{token}" Always;
    pub async fn confirmation_page(&self, form_key: &str, token: &str) -> Result<String> {
        self.execute(OP, Request::new([form_key.to_owned(), token.to_owned()])).await?.text()
    }

    /// Confirms a double opt-in subscription and returns the page shown after it (HTML).
    /// Safe to repeat: a used link changes nothing.
    POST "/f/{formKey}/confirm/{token}" WithIdempotencyKey;
    pub async fn confirm_subscription(&self, form_key: &str, token: &str) -> Result<String> {
        self.execute(OP, Request::new([form_key.to_owned(), token.to_owned()])).await?.text()
    }
}

impl Client {
    /// Erases a person: deletes the contact as [`Client::delete_contact`] does, and
    /// blanks its address and template data in its messages, tracked links and webhook
    /// events; its suppression entries keep only the address's hash.
    ///
    /// Operation `delete_contact` with `erase=true`: `DELETE
    /// /v2/accounts/{accountId}/contacts/{contactId}?erase=true`.
    pub async fn erase_contact(&self, account: AccountId, contact: ContactId) -> Result<Contact> {
        let operation = OPERATIONS
            .iter()
            .find(|operation| operation.id == "delete_contact")
            .ok_or_else(|| Error::InvalidRequest("no delete_contact operation".into()))?;
        let request = Request::new([account.to_string(), contact.to_string()])
            .query([("erase", "true".to_owned())]);
        self.execute(operation, request).await?.json()
    }
}
