//! Health answers and the public unsubscribe form.

use serde::Deserialize;

/// The answer of `healthz` and `readyz`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Health {
    /// `ok`, or what is not ready.
    pub status: String,
}

/// The form a contact posts to `unsubscribe_post` (what the unsubscribe page and
/// one-click `List-Unsubscribe-Post` mail clients send).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnsubscribeForm {
    /// `One-Click` for RFC 8058 one-click unsubscription.
    pub list_unsubscribe: Option<String>,
    /// What the page's button asked for, e.g. `unsubscribe` or `topics`.
    pub action: Option<String>,
    /// The topics chosen on the page.
    pub topics: Vec<String>,
}

impl UnsubscribeForm {
    /// The `application/x-www-form-urlencoded` body (`topic` repeated per topic).
    pub(crate) fn encode(&self) -> String {
        let mut url = reqwest::Url::parse("http://form.invalid/").expect("a valid URL");
        {
            let mut pairs = url.query_pairs_mut();
            if let Some(value) = &self.list_unsubscribe {
                pairs.append_pair("List-Unsubscribe", value);
            }
            if let Some(action) = &self.action {
                pairs.append_pair("action", action);
            }
            for topic in &self.topics {
                pairs.append_pair("topic", topic);
            }
        }
        url.query().unwrap_or_default().to_owned()
    }
}
