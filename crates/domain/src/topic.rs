//! Announcement topics: categories a contact may unsubscribe from on their own.

/// A topic to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Shown to contacts on the unsubscribe page.
    pub name: String,
    /// What the category covers.
    pub description: Option<String>,
}
