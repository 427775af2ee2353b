//! The HTML of a visual-editor (`wysiwyg`) template, normalised when it is saved.
//!
//! A browser's `contenteditable` writes what its editing commands make of the document,
//! which is not always valid HTML (a list inside a paragraph inside a paragraph), and
//! the editor's HTML field takes anything typed or pasted. Such content is parsed the way
//! browsers parse it (html5ever, through ammonia) and written out again: every element
//! closed and nested as a browser would nest it, and only the elements and attributes
//! mail clients render kept (no scripts, forms, frames or event handlers). Template tags
//! in text and attribute values survive as written.

use std::{cell::Cell, collections::HashSet, rc::Rc};

use lol_html::{element, rewrite_str, RewriteStrSettings};

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

/// The deepest nesting of elements an HTML body may have before it is parsed into a
/// tree. The tree builder checks the stack of open elements at each start tag, so a body
/// of 30,000 unclosed `<div>`s (150 KiB, within a template's size) took 25 s to parse in
/// a test build, time a tenant could spend on every save and preview. Mail layouts nest
/// tables a few dozen levels at most.
pub const MAX_NESTING: usize = 500;

/// Elements whose end tag may be left out: the tree builder closes them itself (a `<p>`
/// closes the open `<p>`), so they do not pile up however many are left open.
const SELF_CLOSING_ENDS: [&str; 16] = [
    "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "thead", "tbody", "tfoot",
    "colgroup", "caption", "rt", "rp",
];

/// Refuses HTML that nests elements deeper than [`MAX_NESTING`], before html5ever sees it.
/// The depth is read in one streaming pass (lol_html, linear and without a tree): each
/// start tag of an element that holds content opens a level, its end tag closes it.
///
/// # Errors
/// The sentence that says why, for the `content` field.
pub fn check_nesting(html: &str) -> Result<(), String> {
    let depth = Rc::new(Cell::new(0_usize));
    let deepest = Rc::new(Cell::new(0_usize));
    let opened = Rc::clone(&depth);
    let seen = Rc::clone(&deepest);
    let measured = rewrite_str(
        html,
        RewriteStrSettings {
            element_content_handlers: vec![element!("*", move |element| {
                let name = element.tag_name();
                if !element.can_have_content() || SELF_CLOSING_ENDS.contains(&name.as_str()) {
                    return Ok(());
                }
                opened.set(opened.get() + 1);
                seen.set(seen.get().max(opened.get()));
                if let Some(handlers) = element.end_tag_handlers() {
                    let closed = Rc::clone(&opened);
                    let close: lol_html::EndTagHandler<'static> = Box::new(move |_| {
                        closed.set(closed.get().saturating_sub(1));
                        Ok(())
                    });
                    handlers.push(close);
                }
                Ok(())
            })],
            ..RewriteStrSettings::new()
        },
    );
    match measured {
        Ok(_) if deepest.get() <= MAX_NESTING => Ok(()),
        Ok(_) => Err(format!(
            "nests elements {} levels deep; at most {MAX_NESTING} are accepted",
            deepest.get()
        )),
        Err(error) => Err(format!("cannot be read as HTML: {error}")),
    }
}

/// `content` as valid HTML with only what mail renders. Idempotent.
///
/// # Errors
/// As [`check_nesting`].
pub fn normalise_editor_html(content: &str) -> Result<String, String> {
    check_nesting(content)?;
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
    Ok(restore_template_tags(&cleaned))
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
    use super::{check_nesting, normalise_editor_html, MAX_NESTING};

    #[test]
    fn a_list_inside_nested_paragraphs_becomes_valid_html() {
        let html = normalise_editor_html("<p>Hi<p>there<ul><li>one</ul></p></p>").expect("valid");
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
        )
        .expect("valid");
        assert_eq!(
            html,
            "<p>Hello {{ first_name | default(\"friend\") }}</p>\
             {% if plan == \"pro\" and seats > 3 %}<a href=\"{{ unsubscribe_url }}\">Leave</a>{% endif %}\
             <a>x</a>"
        );
        assert_eq!(
            normalise_editor_html(&html).as_ref(),
            Ok(&html),
            "idempotent"
        );
    }

    #[test]
    fn layout_attributes_and_tables_stay() {
        let html = "<table width=\"600\" cellspacing=\"0\"><tbody><tr><td style=\"color: red\" \
                    colspan=\"2\">x</td></tr></tbody></table>";
        assert_eq!(normalise_editor_html(html).as_deref(), Ok(html));
    }

    #[test]
    fn html_nested_past_the_bound_is_refused_before_it_is_parsed() {
        let deep = "<div>".repeat(30_000);
        let started = std::time::Instant::now();
        let refused = normalise_editor_html(&deep).expect_err("too deep");
        assert!(refused.contains("30000 levels deep"), "{refused}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        let closed = format!("{}x{}", "<div>".repeat(600), "</div>".repeat(600));
        assert!(check_nesting(&closed).is_err());
        let within = format!(
            "{}x{}",
            "<div>".repeat(MAX_NESTING),
            "</div>".repeat(MAX_NESTING)
        );
        assert!(check_nesting(&within).is_ok());
        // Siblings are not depth, and elements the parser closes itself do not pile up.
        assert!(check_nesting(&"<div>x</div>".repeat(10_000)).is_ok());
        assert!(check_nesting(&"<p>x".repeat(10_000)).is_ok());
        assert!(check_nesting(&"<br><img src=x>".repeat(10_000)).is_ok());
    }
}
