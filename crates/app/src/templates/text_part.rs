use mailroom_domain::{patch::Field, template::Template, template::TemplateInput, TemplateId};

use super::{check_nesting, update_template};
use crate::{auth::Member, AppError, Services};

/// The width the text part is wrapped to: under the 78 characters a line of mail should
/// keep to (RFC 5322, 2.1.1).
const TEXT_WIDTH: usize = 76;

/// A plain-text rendering of a template's HTML `content`, its template tags kept as
/// written, so it renders with the same variables: headings, paragraphs, lists and
/// links (as numbered references, the address listed below) in text.
///
/// html2text (over html5ever, the browsers' parsing algorithm) does this; hand-written
/// tag stripping gets entities, nesting and whitespace wrong.
///
/// # Errors
/// As [`check_nesting`]: an HTML template is stored as written, so its nesting is
/// bounded here before html5ever builds its tree.
pub fn text_from_html(content: &str) -> Result<String, String> {
    check_nesting(content)?;
    // The input is a saved template's content, bounded by its size limit; a document
    // html2text cannot lay out (none is known) falls back to no text rather than a 500.
    Ok(html2text::config::plain_no_decorate()
        .link_footnotes(true)
        .string_from_read(content.as_bytes(), TEXT_WIDTH)
        .unwrap_or_default())
}

/// Writes the template's text part from its HTML ([`text_from_html`]), replacing any
/// text part it had; the same checks as any update run (the text must compile).
///
/// # Errors
/// As [`update_template`]: [`AppError::NotFound`] for an unknown template,
/// [`AppError::Invalid`] when the text does not compile as a template, or on `content`
/// when the HTML nests too deep to be read.
pub fn fill_text_part(
    services: &Services,
    member: &Member,
    id: TemplateId,
) -> Result<Template, AppError> {
    let template = super::get_template(services, member, id)?;
    let text = text_from_html(&template.content)
        .map_err(|refusal| AppError::invalid("content", refusal))?;
    update_template(
        services,
        member,
        id,
        TemplateInput {
            text_content: Field::Value(text),
            ..TemplateInput::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::text_from_html;

    #[test]
    fn the_text_keeps_the_words_the_tags_and_the_links() {
        let text = text_from_html(
            "<h1>Hello {{ first_name }}</h1><p>Our <b>news</b> &amp; more.</p>\
             <ul><li>One</li><li>Two</li></ul>\
             <p><a href=\"{{ unsubscribe_url }}\">Unsubscribe</a></p>",
        )
        .expect("readable");
        assert!(text.contains("Hello {{ first_name }}"), "{text}");
        assert!(text.contains("news & more."), "{text}");
        assert!(text.contains("* One"), "{text}");
        assert!(text.contains("{{ unsubscribe_url }}"), "{text}");
        assert!(!text.contains('<'), "{text}");
        assert!(
            text.lines().all(|line| line.chars().count() <= 78),
            "{text}"
        );
    }
}
