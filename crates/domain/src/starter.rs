//! The starter data every new account receives, so the first send needs no setup beyond a
//! mail server: two sample templates, a disabled welcome automation and two topics.

use crate::{
    automation::{NewAutomation, Timing, TriggerCondition},
    slug::{EventSlug, TemplateSlug},
    template::NewTemplate,
    topic::NewTopic,
};

/// Slug of the welcome template, which the sample automation sends.
pub const WELCOME_TEMPLATE_SLUG: &str = "welcome";

/// Everything a new account starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StarterData {
    /// Sample templates; the first is the welcome mail.
    pub templates: Vec<NewTemplate>,
    /// The sample automation, which sends the template slugged [`WELCOME_TEMPLATE_SLUG`].
    pub automation: NewAutomation,
    /// Default topics.
    pub topics: Vec<NewTopic>,
}

fn slug(text: &str) -> TemplateSlug {
    TemplateSlug::parse(text).expect("starter slugs are valid")
}

/// The starter data.
pub fn starter_data() -> StarterData {
    StarterData {
        templates: vec![
            NewTemplate::basic(
                "Welcome",
                slug(WELCOME_TEMPLATE_SLUG),
                "Welcome aboard, {{ first_name }}!",
                concat!(
                    "<!doctype html><html><body>",
                    "<h1>Welcome, {{ first_name }}!</h1>",
                    "<p>Thanks for signing up. We are glad to have you.</p>",
                    "<p><a href=\"{{ unsubscribe_url }}\">Unsubscribe</a></p>",
                    "</body></html>"
                ),
                Some("Welcome, {{ first_name }}!\n\nThanks for signing up. We are glad to have you.\n\nUnsubscribe: {{ unsubscribe_url }}\n"),
            ),
            NewTemplate::basic(
                "Newsletter",
                slug("newsletter"),
                "What's new this month",
                concat!(
                    "<!doctype html><html><body>",
                    "<h1>What's new</h1>",
                    "<p>Hello {{ first_name }}, here is what happened this month.</p>",
                    "<p><a href=\"{{ preferences_url }}\">Email preferences</a> · ",
                    "<a href=\"{{ unsubscribe_url }}\">Unsubscribe</a></p>",
                    "</body></html>"
                ),
                Some("What's new\n\nHello {{ first_name }}, here is what happened this month.\n\nPreferences: {{ preferences_url }}\nUnsubscribe: {{ unsubscribe_url }}\n"),
            ),
        ],
        automation: NewAutomation {
            name: "Welcome new sign-ups".into(),
            trigger_event_slug: EventSlug::normalize("signed_up").expect("valid slug"),
            trigger_condition: TriggerCondition::Once,
            timing: Timing::Immediately,
            is_enabled: false,
        },
        topics: vec![
            NewTopic {
                name: "Newsletter".into(),
                description: Some("Our regular newsletter.".into()),
            },
            NewTopic {
                name: "Product updates".into(),
                description: Some("News about features and changes.".into()),
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welcome_template_exists_and_automation_is_disabled() {
        let data = starter_data();
        assert_eq!(data.templates[0].slug.as_str(), WELCOME_TEMPLATE_SLUG);
        assert!(data.templates[0].content.contains("{{ first_name }}"));
        assert!(!data.automation.is_enabled);
        assert_eq!(data.automation.trigger_event_slug.as_str(), "signed_up");
        let names: Vec<_> = data.topics.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["Newsletter", "Product updates"]);
    }
}
