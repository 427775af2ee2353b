//! The templates of the account pages (settings, contacts, segment builder, saved segments,
//! import, logs, topics, automations, subscribe forms),
//! compiled in beside those of `render`.

/// Every template of the account pages, by name.
pub(super) const EXTRA: [(&str, &str); 15] = [
    ("forms.html", include_str!("templates/forms.html")),
    ("topics.html", include_str!("templates/topics.html")),
    ("topic.html", include_str!("templates/topic.html")),
    (
        "automations.html",
        include_str!("templates/automations.html"),
    ),
    ("automation.html", include_str!("templates/automation.html")),
    ("settings.html", include_str!("templates/settings.html")),
    ("contacts.html", include_str!("templates/contacts.html")),
    ("contact.html", include_str!("templates/contact.html")),
    ("segment.html", include_str!("templates/segment.html")),
    (
        "segment_count.html",
        include_str!("templates/segment_count.html"),
    ),
    ("segments.html", include_str!("templates/segments.html")),
    ("import.html", include_str!("templates/import.html")),
    ("messages.html", include_str!("templates/messages.html")),
    (
        "message_detail.html",
        include_str!("templates/message_detail.html"),
    ),
    (
        "webhook_events.html",
        include_str!("templates/webhook_events.html"),
    ),
];

/// The import page's script: upload progress on the page's progress bar.
pub(super) const IMPORT_SCRIPT: &str = include_str!("templates/import.js");

#[cfg(test)]
mod tests {
    use super::EXTRA;

    #[test]
    fn every_account_page_template_compiles() {
        let mut env = minijinja::Environment::new();
        for (name, source) in EXTRA {
            if let Err(error) = env.add_template(name, source) {
                panic!("{name}: {error:#}");
            }
        }
    }
}
