//! The HTML of a visual-editor (`wysiwyg`) template, normalised when it is saved.
//!
//! A browser's `contenteditable` writes what its editing commands make of the document,
//! which is not always valid HTML (a list inside a paragraph inside a paragraph), and
//! the editor's HTML field takes anything typed or pasted. Such content is parsed the way
//! browsers parse it (html5ever, through ammonia) and written out again: every element
//! closed and nested as a browser would nest it, and only the elements and attributes
//! mail clients render kept (no scripts, forms, frames or event handlers). Template tags
//! in text and attribute values survive as written.

use std::collections::HashSet;

/// Attributes kept on any element besides ammonia's defaults: the presentational ones
/// mail layouts still rely on.
const LAYOUT_ATTRIBUTES: [&str; 8] = [
    "style",
    "align",
    "valign",
    "width",
    "height",
    "bgcolor",
    "border",
    "cellpadding",
];

/// `content` as valid HTML with only what mail renders. Idempotent.
pub fn normalise_editor_html(content: &str) -> String {
    let cleaned = ammonia::Builder::default()
        .add_generic_attributes(LAYOUT_ATTRIBUTES)
        .add_tag_attributes("td", ["colspan", "rowspan"])
        .add_tag_attributes("table", ["cellspacing"])
        // Links keep the author's own `rel`; a mail is no page whose opener matters.
        .link_rel(None)
        .url_relative(ammonia::UrlRelative::PassThrough)
        .clean_content_tags(HashSet::from(["script", "style"]))
        .clean(content)
        .to_string();
    restore_template_tags(&cleaned)
}

/// The serialiser escapes `<`, `>` and `&` in text, `&` and `"` in attributes: inside a
/// template tag (`{{ … }}`, `{% … %}`) they are the template's own operators and strings,
/// so they are written back as they were.
fn restore_template_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(start) = rest.find(['{']) {
        let (before, from) = rest.split_at(start);
        out.push_str(before);
        let close = match from.as_bytes().get(1) {
            Some(b'{') => "}}",
            Some(b'%') => "%}",
            _ => {
                out.push('{');
                rest = &from[1..];
                continue;
            }
        };
        match from[2..].find(close) {
            Some(end) => {
                let tag = &from[..2 + end + 2];
                out.push_str(&html_escape::decode_html_entities(tag));
                rest = &from[tag.len()..];
            }
            None => {
                out.push_str(from);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::normalise_editor_html;

    #[test]
    fn a_list_inside_nested_paragraphs_becomes_valid_html() {
        let html = normalise_editor_html("<p>Hi<p>there<ul><li>one</ul></p></p>");
        assert_eq!(
            html,
            "<p>Hi</p><p>there</p><ul><li>one</li></ul><p></p><p></p>"
        );
    }

    #[test]
    fn what_could_act_goes_and_template_tags_stay() {
        let html = normalise_editor_html(
            "<p onclick=\"x()\">Hello {{ first_name | default(\"friend\") }}</p>\
             <script>alert(1)</script><form><input name=a></form>\
             {% if plan == \"pro\" and seats > 3 %}<a href=\"{{ unsubscribe_url }}\">Leave</a>{% endif %}\
             <a href=\"javascript:alert(1)\">x</a>",
        );
        assert_eq!(
            html,
            "<p>Hello {{ first_name | default(\"friend\") }}</p>\
             {% if plan == \"pro\" and seats > 3 %}<a href=\"{{ unsubscribe_url }}\">Leave</a>{% endif %}\
             <a>x</a>"
        );
        assert_eq!(normalise_editor_html(&html), html, "idempotent");
    }

    #[test]
    fn layout_attributes_and_tables_stay() {
        let html = "<table width=\"600\" cellspacing=\"0\"><tbody><tr><td style=\"color: red\" \
                    colspan=\"2\">x</td></tr></tbody></table>";
        assert_eq!(normalise_editor_html(html), html);
    }
}
