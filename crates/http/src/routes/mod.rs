//! Route wiring, apart from the handlers: which handler answers which path.

mod accounts;
pub mod accounts_dto;
mod announcements;
pub mod announcements_dto;
mod automations;
pub mod automations_dto;
mod contacts;
pub mod contacts_dto;
mod contacts_export;
pub(crate) mod contacts_import;
mod domains;
pub mod domains_dto;
mod feedback;
mod feedback_sources;
pub mod feedback_sources_dto;
pub mod form_pages;
mod forms;
pub mod forms_dto;
mod link_error;
mod mail_servers;
pub mod mail_servers_dto;
mod messages;
pub mod messages_dto;
mod public_page;
mod segments;
pub mod segments_dto;
mod suppressions;
pub mod suppressions_dto;
pub mod system;
mod templates;
pub mod templates_dto;
mod tokens;
pub mod tokens_dto;
mod topics;
pub mod topics_dto;
mod tracking;
mod unsubscribe;
mod webhook_events;
pub mod webhook_events_dto;

use utoipa_actix_web::service_config::ServiceConfig;

/// Everything under `/v2`. A `/count` route is registered before its `/{id}` sibling.
pub fn v2(cfg: &mut ServiceConfig) {
    // actix tries the routes in this order, one pattern match each, until one takes the
    // request: the two that products call at high rates (an event, a send) come first, so
    // they do not pay for matching the other sixty (docs/performance.md, "Design choices, measured").
    // Neither pattern overlaps another route's.
    cfg.service(contacts::record_event)
        .service(messages::send_message)
        .service(tokens::create_token)
        .service(tokens::list_tokens)
        .service(tokens::revoke_token)
        .service(accounts::create_account)
        .service(accounts::list_accounts)
        .service(accounts::get_account)
        .service(accounts::update_account)
        .service(accounts::list_members)
        .service(accounts::add_member)
        .service(accounts::change_member_role)
        .service(accounts::remove_member)
        .service(accounts::set_webhooks)
        .service(webhook_events::list_webhook_events)
        .service(webhook_events::count_webhook_events)
        .service(webhook_events::get_webhook_event)
        .service(webhook_events::retry_webhook_event)
        .service(templates::list_templates)
        .service(templates::count_templates)
        .service(templates::get_template)
        .service(templates::create_template)
        .service(templates::update_template)
        .service(templates::delete_template)
        .service(templates::preview_template)
        .service(templates::test_send_template)
        .service(mail_servers::list_mail_servers)
        .service(mail_servers::count_mail_servers)
        .service(mail_servers::get_mail_server)
        .service(mail_servers::create_mail_server)
        .service(mail_servers::update_mail_server)
        .service(mail_servers::delete_mail_server)
        .service(domains::list_domains)
        .service(domains::count_domains)
        .service(domains::get_domain)
        .service(domains::create_domain)
        .service(domains::verify_domain)
        .service(domains::rotate_domain_key)
        .service(domains::remove_selector)
        .service(domains::delete_domain)
        .service(automations::list_automations)
        .service(automations::count_automations)
        .service(automations::get_automation)
        .service(automations::create_automation)
        .service(automations::update_automation)
        .service(automations::delete_automation)
        .service(announcements::list_announcements)
        .service(announcements::count_announcements)
        .service(announcements::get_announcement)
        .service(announcements::create_announcement)
        .service(announcements::pause_announcement)
        .service(announcements::resume_announcement)
        .service(announcements::cancel_announcement)
        .service(topics::list_topics)
        .service(topics::count_topics)
        .service(topics::get_topic)
        .service(topics::create_topic)
        .service(topics::update_topic)
        .service(topics::delete_topic)
        .service(forms::list_forms)
        .service(forms::count_forms)
        .service(forms::get_form)
        .service(forms::create_form)
        .service(forms::update_form)
        .service(forms::delete_form)
        // `/segments/count` before `/segments/{segmentId}`.
        .service(segments::list_segments)
        .service(segments::count_segments)
        .service(segments::get_segment)
        .service(segments::count_segment_contacts)
        .service(segments::create_segment)
        .service(segments::update_segment)
        .service(segments::delete_segment)
        .service(contacts::list_contacts)
        .service(contacts::count_contacts)
        .service(contacts::upsert_contact)
        .service(contacts::search_contacts)
        .service(contacts::count_search)
        .service(contacts_import::import_contacts)
        .service(contacts::get_contact)
        .service(contacts::unbounce_contact)
        .service(contacts::delete_contact)
        .service(contacts::list_contact_events)
        .service(contacts_export::export_contact)
        .service(contacts::event_names)
        .service(contacts::list_attributes)
        .service(contacts::count_attributes)
        .service(suppressions::list_suppressions)
        .service(suppressions::count_suppressions)
        .service(suppressions::import_suppressions)
        .service(suppressions::export_suppressions)
        .service(suppressions::add_suppression)
        .service(suppressions::remove_suppressions)
        // `/messages/count` and `/messages/stats` before `/messages/{messageId}`.
        .service(messages::list_messages)
        .service(messages::count_messages)
        .service(messages::message_stats)
        .service(messages::get_message)
        .service(messages::cancel_message_by_key)
        .service(messages::cancel_message)
        .service(feedback::record_feedback)
        .service(feedback_sources::list_feedback_sources)
        .service(feedback_sources::get_feedback_source)
        .service(feedback_sources::create_feedback_source)
        .service(feedback_sources::delete_feedback_source)
        .service(feedback_sources::receive_provider_events)
        .service(system::openapi_json);
}

/// Operational routes at the root.
pub fn operations(cfg: &mut ServiceConfig) {
    cfg.service(system::healthz)
        .service(system::readyz)
        .service(system::metrics);
}

/// The public link endpoints at the root: tracking, unsubscribe and subscribe forms. No
/// authentication; the signed token in the path is the credential (a form's page is
/// public by design).
pub fn links(cfg: &mut ServiceConfig) {
    cfg.service(tracking::open_pixel)
        .service(tracking::follow_link)
        .service(unsubscribe::unsubscribe_page)
        .service(unsubscribe::unsubscribe_post)
        .service(form_pages::form_page)
        .service(form_pages::submit_form)
        .service(form_pages::confirmation_page)
        .service(form_pages::confirm_subscription);
}
