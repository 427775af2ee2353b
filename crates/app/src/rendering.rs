//! Rendering a stored template into one concrete message (docs/design.md#8-delivery, Rendering, Sender,
//! Tracking).
//!
//! Pure and synchronous: no I/O, no clock, no randomness. The delivery worker calls
//! [`render_message`] at send time; the template use cases call [`check_syntax`] at save
//! time so a template that does not parse is refused with 400.
//!
//! The template language is [minijinja](https://docs.rs/minijinja) (Jinja2 style):
//! `{{ variable }}`, `{% if %}`, `{% for %}`, filters such as `{{ name | upper }}`.
//! Every field is compiled in a fresh [`minijinja::Environment`] built by one private
//! helper, so all fields share the same configuration:
//!
//! - undefined variables render as the empty string, and so do attribute lookups on them
//!   (`{{ missing.deeper }}`); they are never an error;
//! - only the HTML body (`content`) auto-escapes; every other field is plain text;
//! - each field's render is bounded by [`RENDER_FUEL`] instructions; the whole message by
//!   [`MAX_MESSAGE_BYTES`] of output across its fields, and each header field (subject,
//!   names, cc, bcc, reply-to) by [`MAX_HEADER_BYTES`], so a hostile template can neither
//!   loop forever nor stream unbounded output;
//! - a trailing newline in a field's source is kept (bodies are sent as written).
//!
//! Errors name the field by its wire name: `subject`, `content`, `textContent`,
//! `fromName`, `rcptName`, `cc`, `bcc`, `replyTo`.

use std::{fmt, io, sync::Arc};

use mailroom_domain::template::Template;
use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior, Value};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

#[cfg(test)]
mod tests;

/// How many minijinja instructions one field's render may execute before it is stopped
/// with [`RenderError::OutOfFuel`]. Ordinary templates use a few hundred.
pub const RENDER_FUEL: u64 = 50_000;

/// The most output, in bytes, one message may render to across all its fields before it
/// is stopped with [`RenderError::TooLarge`]. Stored templates are far smaller (request
/// bodies are capped at 1 MiB); the cap only bites on templates that multiply their input
/// in loops. It bounds what a render child sends back and what a worker holds per
/// message.
pub const MAX_MESSAGE_BYTES: usize = 2 * 1024 * 1024;

/// The most output, in bytes, one header field (`subject`, `fromName`, `rcptName`, `cc`,
/// `bcc`, `replyTo`) may render to, before its line breaks are collapsed.
pub const MAX_HEADER_BYTES: usize = 4 * 1024;

/// Wire names of the rendered fields, used in errors.
const SUBJECT: &str = "subject";
const CONTENT: &str = "content";
const TEXT_CONTENT: &str = "textContent";
const FROM_NAME: &str = "fromName";
const RCPT_NAME: &str = "rcptName";
const CC: &str = "cc";
const BCC: &str = "bcc";
const REPLY_TO: &str = "replyTo";

/// The account's tracking defaults, used where the template leaves a flag unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountDefaults {
    /// Rewrite links for click tracking unless the template says otherwise.
    pub click_tracking: bool,
    /// Add the open-tracking pixel unless the template says otherwise.
    pub open_tracking: bool,
}

/// The sender pair of the mail server chosen for this send. The pair applies together:
/// see [`render_message`] for the pairing rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerDefaults {
    /// The server's `defaultFromEmail`.
    pub default_from_email: String,
    /// The server's `defaultFromName`; empty means no display name.
    pub default_from_name: String,
}

/// The contact a message goes to.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Recipient {
    /// The contact's address; the message's `To`, and also the `email` variable.
    pub email: String,
    /// The contact's resolved attributes, keyed by slug exactly as stored (custom slugs
    /// as they are). Each entry becomes a template variable of the same name.
    pub attributes: Map<String, Json>,
}

/// The transactional send's `data` object; each entry becomes a template variable and
/// wins over a contact attribute of the same name.
pub type SendData = Map<String, Json>;

/// Links the worker minted for this message, exposed as the `unsubscribe_url` and
/// `preferences_url` variables.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MessageLinks {
    /// The one-click unsubscribe page (`/u/{token}`); `None` renders as the empty string.
    pub unsubscribe_url: Option<String>,
    /// The subscription preferences page; `None` renders as the empty string.
    pub preferences_url: Option<String>,
}

/// An address with an optional display name, ready for a header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mailbox {
    /// Display name, already single-line and trimmed; `None` when there is none.
    pub name: Option<String>,
    /// The address.
    pub email: String,
}

/// One rendered message, ready for MIME assembly and tracking rewrites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderedMessage {
    /// Subject, single-line (CR/LF runs collapsed to one space) and trimmed.
    pub subject: String,
    /// HTML body, variables HTML-escaped; otherwise as rendered.
    pub html: String,
    /// Plain-text body; `None` when the template has none or it renders to blank.
    pub text: Option<String>,
    /// Sender, after the sender pairing rule.
    pub from: Mailbox,
    /// The recipient, with the rendered `rcptName` as display name.
    pub to: Mailbox,
    /// Rendered `cc`, single-line and trimmed; `None` when unset or blank.
    pub cc: Option<String>,
    /// Rendered `bcc`, single-line and trimmed; `None` when unset or blank.
    pub bcc: Option<String>,
    /// Rendered `replyTo`, single-line and trimmed; `None` when unset or blank.
    pub reply_to: Option<String>,
    /// Effective click tracking: the template's flag, else the account default.
    pub click_tracking: bool,
    /// Effective open tracking: the template's flag, else the account default.
    pub open_tracking: bool,
}

impl RenderedMessage {
    /// The bytes of its text fields together: what holding it costs, about.
    pub fn size(&self) -> usize {
        let optional = |field: &Option<String>| field.as_ref().map_or(0, String::len);
        self.subject.len()
            + self.html.len()
            + optional(&self.text)
            + optional(&self.from.name)
            + self.from.email.len()
            + optional(&self.to.name)
            + self.to.email.len()
            + optional(&self.cc)
            + optional(&self.bcc)
            + optional(&self.reply_to)
    }
}

/// A template field that does not parse.
///
/// Displays as `content: line 3: syntax error: unexpected end of input, expected end of
/// variable block` (without the `line N: ` part when minijinja reports no line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateSyntaxError {
    /// The field's name, as given to [`check_syntax`] (a wire name in [`render_message`]).
    pub field: &'static str,
    /// 1-based line of the error in the field's source, when known.
    pub line: Option<usize>,
    /// minijinja's description, e.g. `syntax error: unexpected end of input, …`.
    pub message: String,
}

impl fmt::Display for TemplateSyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.field)?;
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for TemplateSyntaxError {}

/// Why a template could not be rendered for one send. Every variant is permanent for that
/// template and input: retrying the same send gives the same error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A stored field does not parse (templates are checked at save time, so this only
    /// happens for data written around the API).
    #[error("{0}")]
    Syntax(TemplateSyntaxError),
    /// The field executed more than [`RENDER_FUEL`] instructions.
    #[error("{field}: rendering stopped after {RENDER_FUEL} steps")]
    OutOfFuel {
        /// The field's wire name.
        field: &'static str,
    },
    /// The field rendered to more than its bound: [`MAX_HEADER_BYTES`] for a header
    /// field, else what was left of [`MAX_MESSAGE_BYTES`] after the fields before it.
    #[error("{field}: the rendered output is too large ({})", too_large_bound(*.header))]
    TooLarge {
        /// The field's wire name.
        field: &'static str,
        /// Whether the field's own bound ([`MAX_HEADER_BYTES`]) stopped it, rather than
        /// the message's.
        header: bool,
    },
    /// Evaluation failed, e.g. an unknown filter or an invalid operation on a value.
    #[error("{field}: {}{message}", line_prefix(*.line))]
    Failed {
        /// The field's wire name.
        field: &'static str,
        /// 1-based line of the failing expression, when known.
        line: Option<usize>,
        /// minijinja's description of the failure.
        message: String,
    },
}

impl RenderError {
    /// The wire name of the field that failed.
    pub fn field(&self) -> &'static str {
        match self {
            Self::Syntax(error) => error.field,
            Self::OutOfFuel { field }
            | Self::TooLarge { field, .. }
            | Self::Failed { field, .. } => field,
        }
    }
}

fn too_large_bound(header: bool) -> String {
    if header {
        format!("more than {MAX_HEADER_BYTES} bytes in a header field")
    } else {
        format!(
            "more than {} MiB in the message's fields together",
            MAX_MESSAGE_BYTES / (1024 * 1024)
        )
    }
}

fn line_prefix(line: Option<usize>) -> String {
    line.map(|line| format!("line {line}: "))
        .unwrap_or_default()
}

/// Checks that `source` parses as a template, without rendering it.
///
/// `field` names the field in the error (use the wire name, e.g. `content`). Only the
/// syntax is checked: an unknown filter or function is reported at send time as
/// [`RenderError::Failed`].
///
/// # Errors
/// [`TemplateSyntaxError`] with the field, line and minijinja's message.
pub fn check_syntax(field: &'static str, source: &str) -> Result<(), TemplateSyntaxError> {
    environment()
        .template_from_named_str(template_name(field), source)
        .map(drop)
        .map_err(|error| syntax_error(field, &error))
}

/// Renders `template` for one recipient and send.
///
/// **Variables**, layered in this order, a later layer winning on a name clash:
/// 1. the recipient's resolved attributes, keyed by slug as stored;
/// 2. `email`, the recipient's address;
/// 3. the transactional `data` — so `data` wins over a contact attribute (and over
///    `email`) of the same name;
/// 4. `unsubscribe_url` and `preferences_url`, always defined (the empty string when the
///    link is `None`), so `data` can never spoof them.
///
/// Unknown variables render as the empty string.
///
/// **Escaping**: only `content` (the HTML body) auto-escapes (`<b>` → `&lt;b&gt;`); the
/// subject, text body, `rcptName`, `fromName`, `cc`, `bcc` and `replyTo` do not.
///
/// **Sender pairing**: a template with its own `fromEmail` sends as that address with its
/// own rendered `fromName` (possibly none) and never borrows the server's name. Only a
/// template without `fromEmail` takes the server's `default_from_email` and
/// `default_from_name` together; the template's `fromName` is then ignored, and an empty
/// server name means no display name.
///
/// **Headers**: the subject, both display names, `cc`, `bcc` and `replyTo` have every
/// run of CR/LF collapsed to one space and are trimmed (header injection defence); a
/// name, `cc`, `bcc` or `replyTo` that ends up empty becomes `None`.
///
/// **Tracking**: each flag is the template's value when set, else the account default.
///
/// # Errors
/// [`RenderError`] naming the first field (in the order subject, content, textContent,
/// fromName, rcptName, cc, bcc, replyTo) that fails to parse, runs out of fuel, renders
/// too much output or fails to evaluate.
pub fn render_message(
    template: &Template,
    account: &AccountDefaults,
    server: &ServerDefaults,
    recipient: &Recipient,
    data: &SendData,
    links: &MessageLinks,
) -> Result<RenderedMessage, RenderError> {
    CompiledTemplate::compile(&TemplateFields::of(template))
        .render(account, server, recipient, data, links)
}

/// The fields of a template that rendering reads, owned and serializable, so a render
/// can be handed to another process (the worker's render sandbox).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateFields {
    /// `subject`.
    pub subject: String,
    /// `content`, the HTML body.
    pub content: String,
    /// `textContent`.
    pub text_content: Option<String>,
    /// `fromName`.
    pub from_name: Option<String>,
    /// `fromEmail`.
    pub from_email: Option<String>,
    /// `cc`.
    pub cc: Option<String>,
    /// `bcc`.
    pub bcc: Option<String>,
    /// `rcptName`.
    pub rcpt_name: Option<String>,
    /// `replyTo`.
    pub reply_to: Option<String>,
    /// Click tracking; `None` inherits the account default.
    pub click_tracking: Option<bool>,
    /// Open tracking; `None` inherits the account default.
    pub open_tracking: Option<bool>,
}

impl TemplateFields {
    /// A SHA-256 digest of every field (hex): the key under which a render child keeps the
    /// compiled template. Fields that are equal render alike, so they may share one.
    pub fn digest(&self) -> String {
        use sha2::Digest as _;
        let encoded = serde_json::to_vec(self).unwrap_or_default();
        hex::encode(sha2::Sha256::digest(&encoded))
    }

    /// The rendered fields of `template`.
    pub fn of(template: &Template) -> Self {
        Self {
            subject: template.subject.clone(),
            content: template.content.clone(),
            text_content: template.text_content.clone(),
            from_name: template.from_name.clone(),
            from_email: template.from_email.clone(),
            cc: template.cc.clone(),
            bcc: template.bcc.clone(),
            rcpt_name: template.rcpt_name.clone(),
            reply_to: template.reply_to.clone(),
            click_tracking: template.click_tracking,
            open_tracking: template.open_tracking,
        }
    }
}

/// Everything one message's render reads: [`RenderRequest::render`] is
/// [`render_message`]. Serializable, so the worker can render in a process of its own
/// whose memory is bounded (a template can build huge values in a few instructions, which
/// fuel does not bound).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenderRequest {
    /// The template's fields, shared by the messages of one claim that use the template.
    pub template: Arc<TemplateFields>,
    /// [`TemplateFields::digest`] of `template`, when the caller computed it: a render
    /// child that compiled these fields before renders from its compile, and the fields
    /// need not travel to it again. `None` compiles from the fields.
    #[serde(default)]
    pub template_digest: Option<Arc<str>>,
    /// The account's tracking defaults.
    pub account: AccountDefaults,
    /// The chosen server's sender pair.
    pub server: ServerDefaults,
    /// The recipient.
    pub recipient: Recipient,
    /// The send's `data`.
    pub data: SendData,
    /// The message's minted links.
    pub links: MessageLinks,
}

impl RenderRequest {
    /// Renders as [`render_message`] does.
    ///
    /// # Errors
    /// As [`render_message`].
    pub fn render(&self) -> Result<RenderedMessage, RenderError> {
        CompiledTemplate::compile(&self.template).render(
            &self.account,
            &self.server,
            &self.recipient,
            &self.data,
            &self.links,
        )
    }
}

/// A template's fields compiled once, to render any number of messages: what the render
/// children of the worker keep between messages (a template is lexed and parsed once per
/// child, not once per message; docs/operations.md, "Delivery engine"). Rendering from
/// it is [`render_message`]: the same fuel and output bounds per field and message, the
/// same errors in the same field order (a field that does not parse fails when its turn
/// comes, as if it were compiled then).
pub struct CompiledTemplate {
    env: Environment<'static>,
    /// The fields whose source does not parse.
    syntax_errors: Vec<TemplateSyntaxError>,
    from_email: Option<String>,
    click_tracking: Option<bool>,
    open_tracking: Option<bool>,
    source_bytes: usize,
}

impl fmt::Debug for CompiledTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledTemplate")
            .field("source_bytes", &self.source_bytes)
            .finish_non_exhaustive()
    }
}

impl CompiledTemplate {
    /// Compiles every field of `template` (copying the sources).
    pub fn compile(template: &TemplateFields) -> Self {
        let mut compiled = Self {
            env: environment(),
            syntax_errors: Vec::new(),
            from_email: template.from_email.clone(),
            click_tracking: template.click_tracking,
            open_tracking: template.open_tracking,
            source_bytes: 0,
        };
        let fields = [
            (SUBJECT, Some(&template.subject)),
            (CONTENT, Some(&template.content)),
            (TEXT_CONTENT, template.text_content.as_ref()),
            (FROM_NAME, template.from_name.as_ref()),
            (RCPT_NAME, template.rcpt_name.as_ref()),
            (CC, template.cc.as_ref()),
            (BCC, template.bcc.as_ref()),
            (REPLY_TO, template.reply_to.as_ref()),
        ];
        for (field, source) in fields {
            let Some(source) = source else { continue };
            compiled.source_bytes += source.len();
            if let Err(error) = compiled
                .env
                .add_template_owned(template_name(field), source.clone())
            {
                compiled.syntax_errors.push(syntax_error(field, &error));
            }
        }
        compiled
    }

    /// The bytes of template source it was compiled from (what a cache of compiled
    /// templates bounds).
    pub fn source_bytes(&self) -> usize {
        self.source_bytes
    }

    /// Renders one message as [`render_message`] does.
    ///
    /// # Errors
    /// As [`render_message`].
    pub fn render(
        &self,
        account: &AccountDefaults,
        server: &ServerDefaults,
        recipient: &Recipient,
        data: &SendData,
        links: &MessageLinks,
    ) -> Result<RenderedMessage, RenderError> {
        let renderer = Renderer {
            compiled: self,
            vars: Value::from_serialize(variables(recipient, data, links)),
            used: std::cell::Cell::new(0),
        };
        render_fields(&renderer, server, recipient, account)
    }
}

fn render_fields(
    renderer: &Renderer<'_>,
    server: &ServerDefaults,
    recipient: &Recipient,
    account: &AccountDefaults,
) -> Result<RenderedMessage, RenderError> {
    let template = renderer.compiled;
    let subject = single_line(&renderer.render_required(SUBJECT)?);
    let html = renderer.render_required(CONTENT)?;
    let text = renderer
        .render_optional(TEXT_CONTENT)?
        .filter(|text| !text.trim().is_empty());

    let from = match &template.from_email {
        Some(email) => Mailbox {
            name: renderer.render_header(FROM_NAME)?,
            email: email.clone(),
        },
        None => Mailbox {
            name: non_empty(single_line(&server.default_from_name)),
            email: server.default_from_email.clone(),
        },
    };
    let to = Mailbox {
        name: renderer.render_header(RCPT_NAME)?,
        email: recipient.email.clone(),
    };

    Ok(RenderedMessage {
        subject,
        html,
        text,
        from,
        to,
        cc: renderer.render_header(CC)?,
        bcc: renderer.render_header(BCC)?,
        reply_to: renderer.render_header(REPLY_TO)?,
        click_tracking: template.click_tracking.unwrap_or(account.click_tracking),
        open_tracking: template.open_tracking.unwrap_or(account.open_tracking),
    })
}

/// The one place the template environment is configured; every compile goes through it.
fn environment<'source>() -> Environment<'source> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Chainable);
    env.set_auto_escape_callback(|name| {
        if name.ends_with(".html") {
            AutoEscape::Html
        } else {
            AutoEscape::None
        }
    });
    env.set_keep_trailing_newline(true);
    env.set_fuel(Some(RENDER_FUEL));
    env
}

/// The name a field is compiled under; the `.html` suffix switches on auto-escaping.
fn template_name(field: &'static str) -> &'static str {
    if field == CONTENT {
        "content.html"
    } else {
        field
    }
}

fn syntax_error(field: &'static str, error: &minijinja::Error) -> TemplateSyntaxError {
    TemplateSyntaxError {
        field,
        line: error.line(),
        message: describe(error),
    }
}

/// minijinja's message without the `(in name:line)` suffix its `Display` adds.
fn describe(error: &minijinja::Error) -> String {
    match error.detail() {
        Some(detail) => format!("{}: {detail}", error.kind()),
        None => error.kind().to_string(),
    }
}

/// The variables of one send, layered as documented on [`render_message`].
fn variables(recipient: &Recipient, data: &SendData, links: &MessageLinks) -> Map<String, Json> {
    let mut vars = recipient.attributes.clone();
    vars.insert("email".to_owned(), Json::String(recipient.email.clone()));
    vars.extend(data.iter().map(|(key, value)| (key.clone(), value.clone())));
    for (name, link) in [
        ("unsubscribe_url", &links.unsubscribe_url),
        ("preferences_url", &links.preferences_url),
    ] {
        vars.insert(
            name.to_owned(),
            Json::String(link.clone().unwrap_or_default()),
        );
    }
    vars
}

/// One send's compiled template and variables, and the bytes its fields rendered so far.
struct Renderer<'a> {
    compiled: &'a CompiledTemplate,
    vars: Value,
    used: std::cell::Cell<usize>,
}

impl Renderer<'_> {
    /// Renders one field, bounded by fuel and output size; `None` when the template has
    /// no such field.
    fn render_optional(&self, field: &'static str) -> Result<Option<String>, RenderError> {
        let left = MAX_MESSAGE_BYTES.saturating_sub(self.used.get());
        let header = is_header(field) && MAX_HEADER_BYTES < left;
        let limit = if header { MAX_HEADER_BYTES } else { left };
        if let Some(error) = self
            .compiled
            .syntax_errors
            .iter()
            .find(|error| error.field == field)
        {
            return Err(RenderError::Syntax(error.clone()));
        }
        let Ok(template) = self.compiled.env.get_template(template_name(field)) else {
            return Ok(None);
        };
        let mut out = CappedBuffer::new(limit);
        match template.render_captured_to(&self.vars, &mut out) {
            Ok(_) => {
                self.used.set(self.used.get() + out.bytes.len());
                String::from_utf8(out.bytes)
                    .map(Some)
                    .map_err(|_| RenderError::Failed {
                        field,
                        line: None,
                        message: "rendered output is not UTF-8".to_owned(),
                    })
            }
            Err(_) if out.overflowed => Err(RenderError::TooLarge { field, header }),
            Err(error) if error.kind() == ErrorKind::OutOfFuel => {
                Err(RenderError::OutOfFuel { field })
            }
            Err(error) => Err(RenderError::Failed {
                field,
                line: error.line(),
                message: describe(&error),
            }),
        }
    }

    /// Renders a field every template has (`subject`, `content`).
    fn render_required(&self, field: &'static str) -> Result<String, RenderError> {
        Ok(self.render_optional(field)?.unwrap_or_default())
    }

    /// Renders a header field: single-line, trimmed, `None` when unset or blank.
    fn render_header(&self, field: &'static str) -> Result<Option<String>, RenderError> {
        Ok(self
            .render_optional(field)?
            .and_then(|value| non_empty(single_line(&value))))
    }
}

/// Collapses every run of CR/LF into one space and trims the result.
fn single_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_break = false;
    for c in text.chars() {
        if c == '\r' || c == '\n' {
            if !in_break {
                out.push(' ');
            }
            in_break = true;
        } else {
            out.push(c);
            in_break = false;
        }
    }
    out.trim().to_owned()
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// Whether `field` is a header field, bounded by [`MAX_HEADER_BYTES`].
fn is_header(field: &'static str) -> bool {
    matches!(field, SUBJECT | FROM_NAME | RCPT_NAME | CC | BCC | REPLY_TO)
}

/// An in-memory sink that refuses to grow past its limit; minijinja aborts the render
/// when a write fails.
struct CappedBuffer {
    bytes: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl CappedBuffer {
    fn new(limit: usize) -> Self {
        Self {
            bytes: Vec::new(),
            limit,
            overflowed: false,
        }
    }
}

impl io::Write for CappedBuffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.bytes.len() + buf.len() > self.limit {
            self.overflowed = true;
            return Err(io::Error::other("rendered output too large"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
