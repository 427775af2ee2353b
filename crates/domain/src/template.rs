//! Email templates and the rules for creating and editing them.
//!
//! Editing follows the specification's PATCH rules: an omitted key leaves the stored value
//! alone; `null` clears exactly the nine clearable fields; the content fields and `name`,
//! `slug`, `subject`, `contentType` are not nullable; the empty string is refused for
//! every clearable text field (`null` is the only way to remove a value); `cc`, `bcc` and
//! `replyTo` are not checked as addresses because they may hold template variables.

use crate::{
    account::bounded_name, email::EmailAddress, patch::Field, slug::TemplateSlug, MailServerId,
    TemplateId, Timestamp, ValidationErrors,
};

/// The longest template name.
pub const MAX_TEMPLATE_NAME: usize = 200;
/// The longest header-like field (subject, names, addresses): RFC 5322's line limit.
pub const MAX_HEADER_FIELD: usize = 998;
/// The largest body (`content`, `textContent`).
pub const MAX_BODY_BYTES: usize = 512 * 1024;

/// How the dashboard editor treats a template's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentType {
    /// Raw HTML.
    Html,
    /// The visual editor.
    Wysiwyg,
}

impl ContentType {
    /// The wire and stored name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Html => "html",
            Self::Wysiwyg => "wysiwyg",
        }
    }

    /// Reads the wire and stored name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "html" => Some(Self::Html),
            "wysiwyg" => Some(Self::Wysiwyg),
            _ => None,
        }
    }
}

/// A template to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTemplate {
    /// Dashboard name.
    pub name: String,
    /// Unique slug within the account.
    pub slug: TemplateSlug,
    /// Subject line (may hold variables).
    pub subject: String,
    /// HTML body.
    pub content: String,
    /// Plain-text body.
    pub text_content: Option<String>,
    /// Editor mode.
    pub content_type: ContentType,
    /// Sender display name.
    pub from_name: Option<String>,
    /// Sender address.
    pub from_email: Option<String>,
    /// Copy address (may hold variables).
    pub cc: Option<String>,
    /// Blind-copy address (may hold variables).
    pub bcc: Option<String>,
    /// Recipient display name (may hold variables).
    pub rcpt_name: Option<String>,
    /// Reply-To address (may hold variables).
    pub reply_to: Option<String>,
    /// The mail server that carries this template's sends.
    pub preferred_mail_server: Option<MailServerId>,
    /// Click tracking; `None` inherits the account default.
    pub click_tracking: Option<bool>,
    /// Open tracking; `None` inherits the account default.
    pub open_tracking: Option<bool>,
}

impl NewTemplate {
    /// A template with only the required fields and HTML content; every option unset.
    pub fn basic(
        name: &str,
        slug: TemplateSlug,
        subject: &str,
        content: &str,
        text_content: Option<&str>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            slug,
            subject: subject.to_owned(),
            content: content.to_owned(),
            text_content: text_content.map(str::to_owned),
            content_type: ContentType::Html,
            from_name: None,
            from_email: None,
            cc: None,
            bcc: None,
            rcpt_name: None,
            reply_to: None,
            preferred_mail_server: None,
            click_tracking: None,
            open_tracking: None,
        }
    }

    /// The stored template this becomes.
    pub fn into_template(self, id: TemplateId, now: Timestamp) -> Template {
        Template {
            id,
            name: self.name,
            slug: self.slug,
            subject: self.subject,
            content: self.content,
            text_content: self.text_content,
            content_type: self.content_type,
            from_name: self.from_name,
            from_email: self.from_email,
            cc: self.cc,
            bcc: self.bcc,
            rcpt_name: self.rcpt_name,
            reply_to: self.reply_to,
            preferred_mail_server: self.preferred_mail_server,
            click_tracking: self.click_tracking,
            open_tracking: self.open_tracking,
            created_at: now,
            updated_at: now,
        }
    }
}

/// A stored template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// Id.
    pub id: TemplateId,
    /// Dashboard name.
    pub name: String,
    /// Unique slug within the account.
    pub slug: TemplateSlug,
    /// Subject line (may hold variables).
    pub subject: String,
    /// HTML body.
    pub content: String,
    /// Plain-text body.
    pub text_content: Option<String>,
    /// Editor mode.
    pub content_type: ContentType,
    /// Sender display name; see the sender pairing rule.
    pub from_name: Option<String>,
    /// Sender address; when unset the mail server's default pair applies.
    pub from_email: Option<String>,
    /// Copy address (may hold variables).
    pub cc: Option<String>,
    /// Blind-copy address (may hold variables).
    pub bcc: Option<String>,
    /// Recipient display name (may hold variables).
    pub rcpt_name: Option<String>,
    /// Reply-To address (may hold variables).
    pub reply_to: Option<String>,
    /// The mail server that carries this template's sends.
    pub preferred_mail_server: Option<MailServerId>,
    /// Click tracking; `None` inherits the account default.
    pub click_tracking: Option<bool>,
    /// Open tracking; `None` inherits the account default.
    pub open_tracking: Option<bool>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

/// A template body as received, every key in its three states.
#[derive(Debug, Clone, Default)]
pub struct TemplateInput {
    /// `name`.
    pub name: Field<String>,
    /// `slug`.
    pub slug: Field<String>,
    /// `subject`.
    pub subject: Field<String>,
    /// `content`.
    pub content: Field<String>,
    /// `textContent`.
    pub text_content: Field<String>,
    /// `contentType`.
    pub content_type: Field<String>,
    /// `fromName`.
    pub from_name: Field<String>,
    /// `fromEmail`.
    pub from_email: Field<String>,
    /// `cc`.
    pub cc: Field<String>,
    /// `bcc`.
    pub bcc: Field<String>,
    /// `rcptName`.
    pub rcpt_name: Field<String>,
    /// `replyTo`.
    pub reply_to: Field<String>,
    /// `preferredEmailServer`.
    pub preferred_email_server: Field<String>,
    /// `clickTracking`.
    pub click_tracking: Field<bool>,
    /// `openTracking`.
    pub open_tracking: Field<bool>,
}

/// A parsed partial update. For clearable fields `Some(None)` clears.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplatePatch {
    /// New name.
    pub name: Option<String>,
    /// New slug.
    pub slug: Option<TemplateSlug>,
    /// New subject.
    pub subject: Option<String>,
    /// New HTML body.
    pub content: Option<String>,
    /// New text body.
    pub text_content: Option<String>,
    /// New editor mode.
    pub content_type: Option<ContentType>,
    /// Set or clear the sender name.
    pub from_name: Option<Option<String>>,
    /// Set or clear the sender address.
    pub from_email: Option<Option<String>>,
    /// Set or clear cc.
    pub cc: Option<Option<String>>,
    /// Set or clear bcc.
    pub bcc: Option<Option<String>>,
    /// Set or clear the recipient name.
    pub rcpt_name: Option<Option<String>>,
    /// Set or clear Reply-To.
    pub reply_to: Option<Option<String>>,
    /// Set or clear the preferred mail server.
    pub preferred_mail_server: Option<Option<MailServerId>>,
    /// Set or clear (inherit) click tracking.
    pub click_tracking: Option<Option<bool>>,
    /// Set or clear (inherit) open tracking.
    pub open_tracking: Option<Option<bool>>,
}

fn header_text(name: &str, value: String, errors: &mut ValidationErrors) -> Option<String> {
    if value.chars().count() > MAX_HEADER_FIELD {
        errors.push(
            name,
            format!("must be at most {MAX_HEADER_FIELD} characters"),
        );
        return None;
    }
    Some(value)
}

fn body_text(name: &str, value: String, errors: &mut ValidationErrors) -> Option<String> {
    if value.len() > MAX_BODY_BYTES {
        errors.push(name, "must be at most 512 KiB");
        return None;
    }
    Some(value)
}

/// A clearable text field: `null` clears, `''` is refused, a value is checked by `check`.
fn clearable<T>(
    name: &str,
    field: Field<String>,
    errors: &mut ValidationErrors,
    check: impl FnOnce(String, &mut ValidationErrors) -> Option<T>,
) -> Option<Option<T>> {
    match field {
        Field::Absent => None,
        Field::Null => Some(None),
        Field::Value(value) if value.is_empty() => {
            errors.push(name, "must not be empty; send null to remove the value");
            None
        }
        Field::Value(value) => check(value, errors).map(Some),
    }
}

impl TemplateInput {
    fn parse_fields(self, errors: &mut ValidationErrors) -> TemplatePatch {
        let name = self
            .name
            .not_null("name", errors)
            .and_then(|name| errors.collect("name", bounded_name(&name, MAX_TEMPLATE_NAME)));
        let slug = self
            .slug
            .not_null("slug", errors)
            .and_then(|slug| errors.collect("slug", TemplateSlug::parse(&slug)));
        let subject = self
            .subject
            .not_null("subject", errors)
            .and_then(|subject| {
                if subject.trim().is_empty() {
                    errors.push("subject", "must not be empty");
                    return None;
                }
                header_text("subject", subject, errors)
            });
        let content = self
            .content
            .not_null("content", errors)
            .and_then(|c| body_text("content", c, errors));
        let text_content = self
            .text_content
            .not_null("textContent", errors)
            .and_then(|c| body_text("textContent", c, errors));
        let content_type = self
            .content_type
            .not_null("contentType", errors)
            .and_then(|text| {
                let parsed = ContentType::parse(&text);
                if parsed.is_none() {
                    errors.push("contentType", "must be html or wysiwyg");
                }
                parsed
            });
        let text_field = |name: &str, field: Field<String>, errors: &mut ValidationErrors| {
            clearable(name, field, errors, |value, errors| {
                header_text(name, value, errors)
            })
        };
        let from_name = text_field("fromName", self.from_name, errors);
        let from_email = clearable("fromEmail", self.from_email, errors, |value, errors| {
            errors
                .collect("fromEmail", EmailAddress::parse(&value))
                .map(|email| email.as_str().to_owned())
        });
        let cc = text_field("cc", self.cc, errors);
        let bcc = text_field("bcc", self.bcc, errors);
        let rcpt_name = text_field("rcptName", self.rcpt_name, errors);
        let reply_to = text_field("replyTo", self.reply_to, errors);
        let preferred_mail_server = clearable(
            "preferredEmailServer",
            self.preferred_email_server,
            errors,
            |value, errors| {
                let parsed = MailServerId::parse(&value).ok();
                if parsed.is_none() {
                    errors.push(
                        "preferredEmailServer",
                        "must be the id of a mail server of this account",
                    );
                }
                parsed
            },
        );
        let flag = |field: Field<bool>| match field {
            Field::Absent => None,
            Field::Null => Some(None),
            Field::Value(value) => Some(Some(value)),
        };
        TemplatePatch {
            name,
            slug,
            subject,
            content,
            text_content,
            content_type,
            from_name,
            from_email,
            cc,
            bcc,
            rcpt_name,
            reply_to,
            preferred_mail_server,
            click_tracking: flag(self.click_tracking),
            open_tracking: flag(self.open_tracking),
        }
    }

    /// Parses a creation body: `name`, `slug`, `subject` and `content` are required;
    /// `contentType` defaults to `html`; `null` on an optional field means unset.
    ///
    /// # Errors
    /// Every problem, each under its field.
    pub fn parse_new(self) -> Result<NewTemplate, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        for (name, present) in [
            ("name", matches!(self.name, Field::Value(_))),
            ("slug", matches!(self.slug, Field::Value(_))),
            ("subject", matches!(self.subject, Field::Value(_))),
            ("content", matches!(self.content, Field::Value(_))),
        ] {
            if !present {
                errors.push(name, "is required");
            }
        }
        let fields = self.parse_fields(&mut errors);
        errors.into_result()?;
        let (Some(name), Some(slug), Some(subject), Some(content)) =
            (fields.name, fields.slug, fields.subject, fields.content)
        else {
            return Err(ValidationErrors::single("body", "is incomplete"));
        };
        Ok(NewTemplate {
            name,
            slug,
            subject,
            content,
            text_content: fields.text_content,
            content_type: fields.content_type.unwrap_or(ContentType::Html),
            from_name: fields.from_name.flatten(),
            from_email: fields.from_email.flatten(),
            cc: fields.cc.flatten(),
            bcc: fields.bcc.flatten(),
            rcpt_name: fields.rcpt_name.flatten(),
            reply_to: fields.reply_to.flatten(),
            preferred_mail_server: fields.preferred_mail_server.flatten(),
            click_tracking: fields.click_tracking.flatten(),
            open_tracking: fields.open_tracking.flatten(),
        })
    }

    /// Parses a PATCH body. An empty body is refused.
    ///
    /// # Errors
    /// Every problem, each under its field.
    pub fn parse_patch(self) -> Result<TemplatePatch, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let patch = self.parse_fields(&mut errors);
        errors.into_result()?;
        if patch == TemplatePatch::default() {
            return Err(ValidationErrors::single(
                "body",
                "must change at least one field",
            ));
        }
        Ok(patch)
    }
}

impl TemplatePatch {
    /// Applies the patch; `updated_at` becomes `now`.
    pub fn apply(self, template: &mut Template, now: Timestamp) {
        fn set<T>(target: &mut T, value: Option<T>) {
            if let Some(value) = value {
                *target = value;
            }
        }
        set(&mut template.name, self.name);
        set(&mut template.slug, self.slug);
        set(&mut template.subject, self.subject);
        set(&mut template.content, self.content);
        set(&mut template.text_content, self.text_content.map(Some));
        set(&mut template.content_type, self.content_type);
        set(&mut template.from_name, self.from_name);
        set(&mut template.from_email, self.from_email);
        set(&mut template.cc, self.cc);
        set(&mut template.bcc, self.bcc);
        set(&mut template.rcpt_name, self.rcpt_name);
        set(&mut template.reply_to, self.reply_to);
        set(
            &mut template.preferred_mail_server,
            self.preferred_mail_server,
        );
        set(&mut template.click_tracking, self.click_tracking);
        set(&mut template.open_tracking, self.open_tracking);
        template.updated_at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str) -> Field<String> {
        Field::Value(text.to_owned())
    }

    fn required() -> TemplateInput {
        TemplateInput {
            name: value("Receipt"),
            slug: value("receipt"),
            subject: value("Your receipt"),
            content: value("<p>Thanks</p>"),
            ..TemplateInput::default()
        }
    }

    fn fields(errors: &ValidationErrors) -> Vec<&str> {
        errors.0.iter().map(|e| e.field.as_str()).collect()
    }

    #[test]
    fn creation_requires_the_four_fields_and_defaults_content_type() {
        let created = required().parse_new().expect("valid");
        assert_eq!(created.content_type, ContentType::Html);
        let errors = TemplateInput::default().parse_new().expect_err("empty");
        assert_eq!(fields(&errors), ["name", "slug", "subject", "content"]);
    }

    #[test]
    fn null_clears_the_nine_clearable_fields_and_is_refused_elsewhere() {
        let patch = TemplateInput {
            from_name: Field::Null,
            from_email: Field::Null,
            cc: Field::Null,
            bcc: Field::Null,
            rcpt_name: Field::Null,
            reply_to: Field::Null,
            preferred_email_server: Field::Null,
            click_tracking: Field::Null,
            open_tracking: Field::Null,
            ..TemplateInput::default()
        }
        .parse_patch()
        .expect("clearing is valid");
        assert_eq!(patch.from_name, Some(None));
        assert_eq!(patch.click_tracking, Some(None));
        let errors = TemplateInput {
            name: Field::Null,
            slug: Field::Null,
            subject: Field::Null,
            content: Field::Null,
            text_content: Field::Null,
            content_type: Field::Null,
            ..TemplateInput::default()
        }
        .parse_patch()
        .expect_err("not nullable");
        assert_eq!(
            fields(&errors),
            [
                "name",
                "slug",
                "subject",
                "content",
                "textContent",
                "contentType"
            ]
        );
    }

    #[test]
    fn empty_strings_are_refused_for_clearable_fields() {
        let errors = TemplateInput {
            from_name: value(""),
            from_email: value(""),
            cc: value(""),
            bcc: value(""),
            reply_to: value(""),
            preferred_email_server: value(""),
            ..TemplateInput::default()
        }
        .parse_patch()
        .expect_err("empty");
        assert_eq!(
            fields(&errors),
            [
                "fromName",
                "fromEmail",
                "cc",
                "bcc",
                "replyTo",
                "preferredEmailServer"
            ]
        );
    }

    #[test]
    fn copies_are_not_checked_as_addresses_but_from_email_is() {
        let patch = TemplateInput {
            cc: value("{{ manager_email }}"),
            bcc: value("not an address"),
            reply_to: value("{{ owner }}"),
            ..TemplateInput::default()
        }
        .parse_patch()
        .expect("variables allowed");
        assert_eq!(patch.cc, Some(Some("{{ manager_email }}".to_owned())));
        let errors = TemplateInput {
            from_email: value("nope"),
            ..TemplateInput::default()
        }
        .parse_patch()
        .expect_err("bad email");
        assert_eq!(fields(&errors), ["fromEmail"]);
        let errors = TemplateInput {
            content_type: value("markdown"),
            ..TemplateInput::default()
        }
        .parse_patch()
        .expect_err("bad type");
        assert_eq!(fields(&errors), ["contentType"]);
    }

    #[test]
    fn empty_patch_is_refused_and_omitted_keys_stay() {
        assert!(TemplateInput::default().parse_patch().is_err());
        let now = Timestamp::parse("2026-01-01T00:00:00Z").expect("time");
        let mut template = required()
            .parse_new()
            .expect("valid")
            .into_template(TemplateId::from_uuid(crate::Uuid::nil()), now);
        template.from_name = Some("Ada".into());
        let later = Timestamp::parse("2026-01-02T00:00:00Z").expect("time");
        TemplateInput {
            subject: value("New subject"),
            ..TemplateInput::default()
        }
        .parse_patch()
        .expect("valid")
        .apply(&mut template, later);
        assert_eq!(template.subject, "New subject");
        assert_eq!(template.from_name.as_deref(), Some("Ada"));
        assert_eq!(template.name, "Receipt");
        assert_eq!(template.updated_at, later);
    }
}
