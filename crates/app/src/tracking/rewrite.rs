//! The HTML rewrites of tracking, pure: click tracking replaces each `<a href>` that
//! leads to an `http(s)` URL with a tracking URL and collects the original links in order;
//! open tracking adds a 1×1 pixel at the end of the body.
//!
//! The HTML is parsed by [lol_html](https://docs.rs/lol_html) (a streaming HTML
//! rewriter), so links in comments, scripts or attribute values of other elements are
//! left alone, and whatever is not an `<a href>` passes through byte for byte. An `href`
//! is read with its HTML entities decoded (minijinja's auto-escape writes `/` as
//! `&#x2f;`), so the stored link is the URL a mail client would have opened.

use lol_html::{element, rewrite_str, RewriteStrSettings};

/// The most links one message tracks; further links are left as they are (the click
/// token numbers positions with two bytes, and no real email comes near this).
pub const MAX_TRACKED_LINKS: usize = 1000;

/// An HTML body after the tracking rewrites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedHtml {
    /// The rewritten HTML.
    pub html: String,
    /// The original links, indexed by the position given to the click URL builder. A
    /// link that occurs twice is stored once and both anchors share its position.
    pub links: Vec<String>,
}

/// What to rewrite.
pub struct Rewrites<'a> {
    /// The pixel's URL, for open tracking.
    pub pixel_url: Option<&'a str>,
    /// The tracking URL of the link at a position, for click tracking.
    pub click_url: Option<&'a dyn Fn(u16) -> String>,
    /// Links starting with this prefix are the service's own (the unsubscribe page) and
    /// are never rewritten.
    pub own_prefix: &'a str,
}

/// Applies `rewrites` to `html`. When the HTML cannot be rewritten (lol_html refuses
/// it), the body goes out untracked rather than not at all: links are left as written,
/// and only the pixel is appended.
pub fn track_html(html: &str, rewrites: &Rewrites<'_>) -> TrackedHtml {
    let mut links: Vec<String> = Vec::new();
    let mut html = match rewrites.click_url {
        None => html.to_owned(),
        Some(click_url) => {
            let rewritten = rewrite_str(
                html,
                RewriteStrSettings {
                    element_content_handlers: vec![element!("a[href]", |anchor| {
                        let Some(raw) = anchor.get_attribute("href") else {
                            return Ok(());
                        };
                        let link = html_escape::decode_html_entities(&raw).trim().to_owned();
                        if !is_web_link(&link) || link.starts_with(rewrites.own_prefix) {
                            return Ok(());
                        }
                        let position = match links.iter().position(|known| *known == link) {
                            Some(position) => position,
                            None if links.len() < MAX_TRACKED_LINKS => {
                                links.push(link);
                                links.len() - 1
                            }
                            None => return Ok(()),
                        };
                        let position = u16::try_from(position)?;
                        let url = click_url(position);
                        anchor.set_attribute(
                            "href",
                            &html_escape::encode_double_quoted_attribute(&url),
                        )?;
                        Ok(())
                    })],
                    ..RewriteStrSettings::new()
                },
            );
            match rewritten {
                Ok(rewritten) => rewritten,
                Err(error) => {
                    tracing::warn!(%error, "click tracking skipped: the HTML cannot be rewritten");
                    links.clear();
                    html.to_owned()
                }
            }
        }
    };
    if let Some(pixel_url) = rewrites.pixel_url {
        append_pixel(&mut html, pixel_url);
    }
    TrackedHtml { html, links }
}

/// `http://` or `https://`, in any case. Other schemes (`mailto:`, `tel:`, anchors,
/// relative paths, template leftovers) are not tracked.
fn is_web_link(link: &str) -> bool {
    let starts = |scheme: &str| {
        link.as_bytes()
            .get(..scheme.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(scheme.as_bytes()))
    };
    starts("http://") || starts("https://")
}

/// Inserts the pixel before the last `</body`, or at the end when there is none.
fn append_pixel(html: &mut String, url: &str) {
    let pixel = format!(
        r#"<img src="{}" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0">"#,
        html_escape::encode_double_quoted_attribute(url)
    );
    let at = html
        .to_ascii_lowercase()
        .rfind("</body")
        .unwrap_or(html.len());
    html.insert_str(at, &pixel);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn click(position: u16) -> String {
        format!("https://mail.example/t/c/T{position}")
    }

    fn clicks_only(html: &str) -> TrackedHtml {
        track_html(
            html,
            &Rewrites {
                pixel_url: None,
                click_url: Some(&click),
                own_prefix: "https://mail.example/",
            },
        )
    }

    #[test]
    fn web_links_are_rewritten_in_order_with_entities_decoded() {
        let tracked = clicks_only(
            r#"<p><a href="https:&#x2f;&#x2f;shop.example&#x2f;a?x=1&amp;y=2">A</a>
<a class="b" href='HTTP://shop.example/b'>B</a> <a href="https://shop.example/a?x=1&y=2">again</a></p>"#,
        );
        assert_eq!(
            tracked.links,
            vec![
                "https://shop.example/a?x=1&y=2".to_owned(),
                "HTTP://shop.example/b".to_owned()
            ]
        );
        assert_eq!(
            tracked.html,
            r#"<p><a href="https://mail.example/t/c/T0">A</a>
<a class="b" href="https://mail.example/t/c/T1">B</a> <a href="https://mail.example/t/c/T0">again</a></p>"#
        );
    }

    #[test]
    fn other_schemes_own_links_comments_and_lookalikes_stay() {
        let html = r##"<a href="mailto:ada@example.com">m</a><a href="#top">t</a><a href="/rel">r</a>
<a href="https://mail.example/u/TOKEN">unsubscribe</a><a>no href</a>
<!-- <a href="https://shop.example/hidden">x</a> --><img src="https://shop.example/i.png">
<area href="https://shop.example/area"><a href="javascript:alert(1)">j</a>"##;
        let tracked = clicks_only(html);
        assert!(tracked.links.is_empty(), "{:?}", tracked.links);
        assert_eq!(tracked.html, html, "untouched byte for byte");
    }

    #[test]
    fn the_pixel_goes_before_the_body_end_or_at_the_end() {
        let rewrites = Rewrites {
            pixel_url: Some("https://mail.example/t/o/P&Q"),
            click_url: None,
            own_prefix: "https://mail.example/",
        };
        let tracked = track_html("<html><BODY><p>Hi</p></BODY></html>", &rewrites);
        assert_eq!(
            tracked.html,
            r#"<html><BODY><p>Hi</p><img src="https://mail.example/t/o/P&amp;Q" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0"></BODY></html>"#
        );
        let bare = track_html("<p>Hi</p>", &rewrites);
        assert!(bare.html.starts_with("<p>Hi</p><img src="), "{}", bare.html);
        assert!(bare.links.is_empty());
        // Links are not touched without click tracking.
        let links = track_html(r#"<a href="https://shop.example/">s</a>"#, &rewrites);
        assert!(links
            .html
            .starts_with(r#"<a href="https://shop.example/">s</a><img"#));
    }

    #[test]
    fn a_hostile_body_cannot_break_out_of_the_attribute() {
        let tracked = clicks_only(r#"<a href="https://x.example/&quot;><script>">x</a>"#);
        assert_eq!(
            tracked.links,
            vec![r#"https://x.example/"><script>"#.to_owned()]
        );
        assert_eq!(
            tracked.html,
            r#"<a href="https://mail.example/t/c/T0">x</a>"#
        );
    }

    #[test]
    fn links_beyond_the_cap_stay_untracked() {
        let html: String = (0..=MAX_TRACKED_LINKS)
            .map(|i| format!(r#"<a href="https://shop.example/{i}">{i}</a>"#))
            .collect();
        let tracked = clicks_only(&html);
        assert_eq!(tracked.links.len(), MAX_TRACKED_LINKS);
        assert!(tracked.html.ends_with(&format!(
            r#"<a href="https://shop.example/{MAX_TRACKED_LINKS}">{MAX_TRACKED_LINKS}</a>"#
        )));
    }
}
