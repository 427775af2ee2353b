//! The transfer encoding of a message's text and HTML parts, in one pass over the
//! rendered text (docs/performance.md, "Design choices, measured").
//!
//! lettre's `Body::new` makes three passes over a part (it picks the encoding, turns line
//! ends into CRLF by inserting one `\r` at a time, then hands the text to the
//! `quoted_printable` crate, which appends one byte at a time), and the three together
//! were 17 % of the worker's CPU for a 5 KB HTML body. Here one scan picks the encoding
//! and the writer copies whole runs of literal bytes: the output is the same kind of body
//! lettre builds (7bit when it can be, quoted-printable for mostly-ASCII text, the rest
//! left to lettre's base64 encoder), checked against a MIME parser in the tests below.

use lettre::message::{header::ContentTransferEncoding, Body};

/// The longest line a body is sent with, in bytes before the CRLF: RFC 2045's limit for
/// quoted-printable (6.7, rule 5), and lettre's bound for leaving a part unencoded.
const LINE_LIMIT: usize = 76;

/// The longest run of text on a quoted-printable line: one byte is kept for the `=` of a
/// soft line break.
const QP_TEXT_LIMIT: usize = LINE_LIMIT - 1;

/// Bytes quoted-printable writes as themselves (RFC 2045, 6.7, rules 2 and 3): printable
/// ASCII but `=`, and space and tab, which are encoded instead where they would end a line.
const LITERAL: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = b'!';
    while byte <= b'~' {
        table[byte as usize] = byte != b'=';
        byte += 1;
    }
    table[b' ' as usize] = true;
    table[b'\t' as usize] = true;
    table
};

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The part's body, encoded for the wire with CRLF line ends: `7bit` for ASCII text whose
/// lines fit [`LINE_LIMIT`], quoted-printable for text with at most a third of its bytes
/// to escape, else base64 (lettre's own choice and encoder).
pub(crate) fn encode_text(text: &str) -> Body {
    let bytes = text.as_bytes();
    if fits_seven_bit(bytes) {
        return Body::dangerous_pre_encoded(
            crlf_line_ends(bytes),
            ContentTransferEncoding::SevenBit,
        );
    }
    let escaped = bytes.iter().filter(|&&b| !LITERAL[usize::from(b)]).count();
    if escaped <= bytes.len() / 3 {
        return Body::dangerous_pre_encoded(
            quoted_printable(bytes),
            ContentTransferEncoding::QuotedPrintable,
        );
    }
    // Base64 by name: lettre's own choice would send a text with a bare CR (which no other
    // encoding here can carry) as 7bit, CR and all.
    Body::new_with_encoding(text.to_owned(), ContentTransferEncoding::Base64)
        .unwrap_or_else(|_| Body::new(text.to_owned()))
}

/// Whether `bytes` may go as they are: ASCII without NUL, every `\r` the start of a CRLF,
/// and no line longer than [`LINE_LIMIT`].
fn fits_seven_bit(bytes: &[u8]) -> bool {
    if !bytes.is_ascii() || memchr::memchr(0, bytes).is_some() {
        return false;
    }
    let mut line_start = 0;
    for end in memchr::memchr_iter(b'\n', bytes) {
        let line = &bytes[line_start..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > LINE_LIMIT || memchr::memchr(b'\r', line).is_some() {
            return false;
        }
        line_start = end + 1;
    }
    let last = &bytes[line_start..];
    last.len() <= LINE_LIMIT && memchr::memchr(b'\r', last).is_none()
}

/// `bytes` with every bare `\n` turned into CRLF (every `\r` already starts one).
fn crlf_line_ends(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 32 + 2);
    let mut from = 0;
    for end in memchr::memchr_iter(b'\n', bytes) {
        let line = &bytes[from..end];
        out.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
        out.extend_from_slice(b"\r\n");
        from = end + 1;
    }
    out.extend_from_slice(&bytes[from..]);
    out
}

/// The length of the line break at `at` in `bytes` (`\n` or `\r\n`), 0 if none starts there.
fn line_break_at(bytes: &[u8], at: usize) -> usize {
    match bytes.get(at..at + 2) {
        Some(b"\r\n") => 2,
        _ if bytes.get(at) == Some(&b'\n') => 1,
        _ => 0,
    }
}

/// `bytes` in quoted-printable (RFC 2045, 6.7), as text: line breaks (`\n` or `\r\n`)
/// become CRLF, runs of literal bytes are copied whole, and soft line breaks keep every
/// line within [`LINE_LIMIT`] bytes, the `=` included.
fn quoted_printable(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 8 + 16);
    let mut line = 0;
    let mut at = 0;
    while at < bytes.len() {
        let line_break = line_break_at(bytes, at);
        if line_break > 0 {
            out.extend_from_slice(b"\r\n");
            line = 0;
            at += line_break;
            continue;
        }
        let byte = bytes[at];
        if !LITERAL[usize::from(byte)] {
            push_escaped(&mut out, &mut line, byte);
            at += 1;
            continue;
        }
        let mut end = at + 1;
        while end < bytes.len() && LITERAL[usize::from(bytes[end])] {
            end += 1;
        }
        // A space or tab must not end an encoded line (rule 3): one that ends the text's
        // line is escaped instead of copied.
        let ends_line = end == bytes.len() || line_break_at(bytes, end) > 0;
        let trailing_blank = ends_line && matches!(bytes[end - 1], b' ' | b'\t');
        let copy_end = if trailing_blank { end - 1 } else { end };
        while at < copy_end {
            if line == QP_TEXT_LIMIT {
                out.extend_from_slice(b"=\r\n");
                line = 0;
            }
            let take = (QP_TEXT_LIMIT - line).min(copy_end - at);
            out.extend_from_slice(&bytes[at..at + take]);
            line += take;
            at += take;
        }
        if trailing_blank {
            push_escaped(&mut out, &mut line, bytes[at]);
            at += 1;
        }
    }
    out
}

/// Appends `=XX` for `byte`, after a soft line break if the line has no room for it.
fn push_escaped(out: &mut Vec<u8>, line: &mut usize, byte: u8) {
    if *line + 3 > QP_TEXT_LIMIT {
        out.extend_from_slice(b"=\r\n");
        *line = 0;
    }
    out.extend_from_slice(&[
        b'=',
        HEX[usize::from(byte >> 4)],
        HEX[usize::from(byte & 0x0f)],
    ]);
    *line += 3;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The text a reader gets back: what a MIME parser decodes from the part.
    fn decoded(body: &Body) -> Vec<u8> {
        let raw = [
            format!(
                "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: {}\r\n\r\n",
                body.encoding()
            )
            .as_bytes(),
            body.as_ref(),
        ]
        .concat();
        let message = mail_parser::MessageParser::default()
            .parse(&raw)
            .expect("a MIME part");
        message
            .body_text(0)
            .expect("a text body")
            .into_owned()
            .into_bytes()
    }

    /// The text with its line ends as CRLF, as it must arrive.
    fn with_crlf(text: &str) -> String {
        text.replace("\r\n", "\n").replace('\n', "\r\n")
    }

    fn assert_wire_safe(body: &Body) {
        let wire = body.as_ref();
        assert!(wire.is_ascii(), "{:?}", String::from_utf8_lossy(wire));
        for line in wire.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            assert!(
                line.len() <= LINE_LIMIT,
                "{} bytes: {:?}",
                line.len(),
                String::from_utf8_lossy(line)
            );
            assert!(!line.contains(&b'\r'), "a bare CR");
            if body.encoding() == ContentTransferEncoding::QuotedPrintable {
                assert!(
                    !matches!(line.last(), Some(b' ' | b'\t')),
                    "{:?}",
                    String::from_utf8_lossy(line)
                );
            }
        }
    }

    #[test]
    fn each_kind_of_text_gets_its_encoding() {
        let cases = [
            (
                "<p>Hello Ada,</p>\n<p>Short lines.</p>\n",
                ContentTransferEncoding::SevenBit,
            ),
            (
                &*"<p>one long line</p>".repeat(250),
                ContentTransferEncoding::QuotedPrintable,
            ),
            (
                "Grüße aus Köln: das Wetter ist schön, der Preis 5 € ",
                ContentTransferEncoding::QuotedPrintable,
            ),
            ("Привет, мир! Как дела?", ContentTransferEncoding::Base64),
            ("bare\rCR", ContentTransferEncoding::QuotedPrintable),
        ];
        for (text, encoding) in cases {
            let body = encode_text(text);
            assert_eq!(body.encoding(), encoding, "{text:?}");
            assert_wire_safe(&body);
        }
    }

    #[test]
    fn quoted_printable_escapes_what_it_must_and_breaks_long_lines() {
        let body = encode_text(&format!("a=b \t\n{}é\nend ", "x".repeat(80)));
        assert_eq!(
            String::from_utf8(body.as_ref().to_vec()).unwrap(),
            format!(
                "a=3Db =09\r\n{}=\r\n{}=C3=A9\r\nend=20",
                "x".repeat(75),
                "x".repeat(5)
            )
        );
    }

    #[test]
    fn html_of_the_benchmark_comes_back_whole() {
        let html = format!(
            "<p>Hello Ada,</p>{}",
            "<p style=\"margin: 0 0 12px\">Lorem ipsum dolor sit amet, consectetur.</p>".repeat(70)
        );
        let body = encode_text(&html);
        assert_eq!(body.encoding(), ContentTransferEncoding::QuotedPrintable);
        assert_wire_safe(&body);
        assert_eq!(decoded(&body), html.as_bytes());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any text comes back whole (line ends as CRLF) and goes on the wire as short
        /// ASCII lines, whatever the encoding chosen.
        #[test]
        fn any_text_comes_back_whole(
            text in proptest::collection::vec(
                prop_oneof![
                    4 => "[a-z]{1,90}",
                    1 => Just(" ".to_owned()),
                    1 => Just("\t".to_owned()),
                    1 => Just("=".to_owned()),
                    1 => Just("\n".to_owned()),
                    1 => Just("\r\n".to_owned()),
                    1 => Just(" \n".to_owned()),
                    1 => "[é€ü🙂Ж]{1,3}",
                    1 => "[\\x01-\\x1f\\x7f]",
                ],
                0..60,
            ).prop_map(|parts| parts.concat())
        ) {
            let body = encode_text(&text);
            assert_wire_safe(&body);
            // A bare CR is kept (escaped) rather than made a line break: compare with it
            // left alone.
            if !text.replace("\r\n", "").contains('\r') {
                prop_assert_eq!(String::from_utf8(decoded(&body)).unwrap(), with_crlf(&text));
            }
        }
    }
}
