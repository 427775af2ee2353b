//! Templates. This issue brings the read side (the walkthrough lists them); create,
//! update and delete arrive with the templates issue.

mod count_templates;
mod get_template;
mod list_templates;

pub use count_templates::count_templates;
pub use get_template::get_template;
pub use list_templates::list_templates;
