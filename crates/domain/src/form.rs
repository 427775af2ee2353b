//! Subscribe forms: an account's public sign-up forms, what they accept, and what a post
//! to one asks for (docs/api-decisions.md, "Subscribe forms and double opt-in").

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use serde_json::{Map, Value};
use validator::ValidateUrl;

use crate::{
    account::bounded_name,
    attribute::{check_custom_slug, AttributeValue},
    email::EmailAddress,
    patch::Field,
    webhook::WebhookUrl,
    AccountId, FormId, TemplateId, Timestamp, TopicId, Uuid, ValidationErrors,
};

/// The most forms an account holds.
pub const MAX_FORMS_PER_ACCOUNT: u64 = 50;
/// The longest form name.
pub const MAX_FORM_NAME: usize = 200;
/// The most attribute slugs a form accepts.
pub const MAX_FORM_ATTRIBUTES: usize = 20;
/// The most topics a form subscribes to.
pub const MAX_FORM_TOPICS: usize = 50;
/// The longest redirect URL.
pub const MAX_REDIRECT_URL: usize = 2048;
/// The form field that people leave empty and bots fill: a post with it filled is
/// answered as a success and changes nothing. Its name holds a hyphen, so no attribute
/// slug can take it.
pub const HONEYPOT_FIELD: &str = "website-url";
/// The form field carrying the hosted page's signed time token.
pub const TIME_TOKEN_FIELD: &str = "form-token";
/// The template variable holding the confirmation link in a confirmation mail.
pub const CONFIRM_URL_VARIABLE: &str = "confirm_url";

/// Where a browser is sent after a post or a confirmation: an absolute `http(s)` URL
/// with a host and no user part, at most [`MAX_REDIRECT_URL`] characters, without white
/// space, quotes or angle brackets. It comes from the form as its account saved it,
/// never from the request, so the form cannot be made an open redirect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectUrl(String);

impl RedirectUrl {
    /// Checks the URL.
    ///
    /// # Errors
    /// A message naming what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.chars().count() > MAX_REDIRECT_URL {
            return Err(format!("must be at most {MAX_REDIRECT_URL} characters"));
        }
        let shape = "must be an absolute http or https URL with a host";
        let url = WebhookUrl::parse(text).map_err(|_| shape.to_owned())?;
        let authority = text
            .split_once("://")
            .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or_default())
            .unwrap_or_default();
        let bad_char = text
            .chars()
            .any(|c| c.is_control() || matches!(c, '"' | '\'' | '<' | '>' | '`' | '\\'));
        if url.host().is_empty() || authority.contains('@') {
            return Err(format!("{shape} and no user name"));
        }
        if bad_char || !text.validate_url() {
            return Err(shape.to_owned());
        }
        Ok(Self(text.to_owned()))
    }

    /// The URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a form is: everything but its id and dates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormSettings {
    /// Shown to the account only.
    pub name: String,
    /// The topics a post subscribes to (topics of the account), in the order given.
    pub topic_ids: Vec<TopicId>,
    /// The custom attribute slugs a post may set.
    pub attributes: Vec<String>,
    /// Whether a post waits for the address's owner to follow a confirmation link.
    pub double_opt_in: bool,
    /// The template of the confirmation mail (required with double opt-in).
    pub confirmation_template_id: Option<TemplateId>,
    /// Where the browser goes after a post from the hosted page.
    pub success_redirect_url: Option<RedirectUrl>,
    /// Where the browser goes after a confirmation.
    pub confirmation_redirect_url: Option<RedirectUrl>,
}

/// A stored form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Form {
    /// Id.
    pub id: FormId,
    /// What it is.
    pub settings: FormSettings,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

/// A form body as received (create or PATCH).
#[derive(Debug, Clone, Default)]
pub struct FormInput {
    /// `name`.
    pub name: Field<String>,
    /// `topicIds`.
    pub topic_ids: Field<Vec<String>>,
    /// `attributes`.
    pub attributes: Field<Vec<String>>,
    /// `doubleOptIn`.
    pub double_opt_in: Field<bool>,
    /// `confirmationTemplateId`.
    pub confirmation_template_id: Field<String>,
    /// `successRedirectUrl`.
    pub success_redirect_url: Field<String>,
    /// `confirmationRedirectUrl`.
    pub confirmation_redirect_url: Field<String>,
}

/// A parsed PATCH: `None` keeps a field, `Some(None)` clears a clearable one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FormPatch {
    /// New name.
    pub name: Option<String>,
    /// New topics.
    pub topic_ids: Option<Vec<TopicId>>,
    /// New attribute slugs.
    pub attributes: Option<Vec<String>>,
    /// Double opt-in on or off.
    pub double_opt_in: Option<bool>,
    /// Set or clear the confirmation template.
    pub confirmation_template_id: Option<Option<TemplateId>>,
    /// Set or clear the success redirect.
    pub success_redirect_url: Option<Option<RedirectUrl>>,
    /// Set or clear the confirmation redirect.
    pub confirmation_redirect_url: Option<Option<RedirectUrl>>,
}

fn clearable<T>(
    field: Field<String>,
    name: &str,
    errors: &mut ValidationErrors,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Option<Option<T>> {
    match field {
        Field::Absent => None,
        Field::Null => Some(None),
        Field::Value(text) if text.trim().is_empty() => {
            errors.push(name, "must not be empty; null clears it");
            None
        }
        Field::Value(text) => match parse(&text) {
            Ok(value) => Some(Some(value)),
            Err(message) => {
                errors.push(name, message);
                None
            }
        },
    }
}

impl FormInput {
    fn parse_fields(self, errors: &mut ValidationErrors) -> FormPatch {
        let name = self
            .name
            .not_null("name", errors)
            .and_then(|name| errors.collect("name", bounded_name(&name, MAX_FORM_NAME)));
        let topic_ids = self.topic_ids.not_null("topicIds", errors).and_then(|ids| {
            if ids.len() > MAX_FORM_TOPICS {
                errors.push(
                    "topicIds",
                    format!("holds {} topics; at most {MAX_FORM_TOPICS}", ids.len()),
                );
                return None;
            }
            let mut parsed: Vec<TopicId> = Vec::with_capacity(ids.len());
            let mut ok = true;
            for (index, text) in ids.iter().enumerate() {
                match TopicId::parse(text) {
                    Ok(id) if !parsed.contains(&id) => parsed.push(id),
                    Ok(_) => {}
                    Err(_) => {
                        errors.push(
                            format!("topicIds[{index}]"),
                            "must be the id of a topic of this account",
                        );
                        ok = false;
                    }
                }
            }
            ok.then_some(parsed)
        });
        let attributes = self
            .attributes
            .not_null("attributes", errors)
            .and_then(|slugs| {
                if slugs.len() > MAX_FORM_ATTRIBUTES {
                    errors.push(
                        "attributes",
                        format!(
                            "holds {} attributes; a form accepts at most {MAX_FORM_ATTRIBUTES}",
                            slugs.len()
                        ),
                    );
                    return None;
                }
                let mut parsed: Vec<String> = Vec::with_capacity(slugs.len());
                let mut ok = true;
                for (index, slug) in slugs.into_iter().enumerate() {
                    if let Err(error) = check_custom_slug(&slug) {
                        errors.push(format!("attributes[{index}]"), error.to_string());
                        ok = false;
                    } else if !parsed.contains(&slug) {
                        parsed.push(slug);
                    }
                }
                ok.then_some(parsed)
            });
        let double_opt_in = self.double_opt_in.not_null("doubleOptIn", errors);
        let confirmation_template_id = clearable(
            self.confirmation_template_id,
            "confirmationTemplateId",
            errors,
            |text| {
                TemplateId::parse(text.trim())
                    .map_err(|_| "must be the id of a template of this account".to_owned())
            },
        );
        let success_redirect_url = clearable(
            self.success_redirect_url,
            "successRedirectUrl",
            errors,
            RedirectUrl::parse,
        );
        let confirmation_redirect_url = clearable(
            self.confirmation_redirect_url,
            "confirmationRedirectUrl",
            errors,
            RedirectUrl::parse,
        );
        FormPatch {
            name,
            topic_ids,
            attributes,
            double_opt_in,
            confirmation_template_id,
            success_redirect_url,
            confirmation_redirect_url,
        }
    }

    /// Parses a creation body: `name` required, the rest optional (no topics, no
    /// attributes, double opt-in off).
    ///
    /// # Errors
    /// Every problem, each under its field.
    pub fn parse_new(self) -> Result<FormSettings, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        if !matches!(self.name, Field::Value(_)) {
            errors.push("name", "is required");
        }
        let patch = self.parse_fields(&mut errors);
        errors.into_result()?;
        let settings = FormSettings {
            name: patch
                .name
                .ok_or_else(|| ValidationErrors::single("name", "is required"))?,
            topic_ids: patch.topic_ids.unwrap_or_default(),
            attributes: patch.attributes.unwrap_or_default(),
            double_opt_in: patch.double_opt_in.unwrap_or(false),
            confirmation_template_id: patch.confirmation_template_id.flatten(),
            success_redirect_url: patch.success_redirect_url.flatten(),
            confirmation_redirect_url: patch.confirmation_redirect_url.flatten(),
        };
        settings.check()?;
        Ok(settings)
    }

    /// Parses an update; an empty body is refused.
    ///
    /// # Errors
    /// Every problem, each under its field.
    pub fn parse_patch(self) -> Result<FormPatch, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let patch = self.parse_fields(&mut errors);
        errors.into_result()?;
        if patch == FormPatch::default() {
            return Err(ValidationErrors::single(
                "body",
                "must change at least one of name, topicIds, attributes, doubleOptIn, \
                 confirmationTemplateId, successRedirectUrl, confirmationRedirectUrl",
            ));
        }
        Ok(patch)
    }
}

impl FormSettings {
    /// The rule across fields: double opt-in needs a confirmation template.
    ///
    /// # Errors
    /// On `confirmationTemplateId` when it is missing.
    pub fn check(&self) -> Result<(), ValidationErrors> {
        if self.double_opt_in && self.confirmation_template_id.is_none() {
            return Err(ValidationErrors::single(
                "confirmationTemplateId",
                "is required when doubleOptIn is true",
            ));
        }
        Ok(())
    }
}

impl FormPatch {
    /// Applies the patch; the caller checks the result with [`FormSettings::check`].
    pub fn apply(self, settings: &mut FormSettings) {
        if let Some(name) = self.name {
            settings.name = name;
        }
        if let Some(topics) = self.topic_ids {
            settings.topic_ids = topics;
        }
        if let Some(attributes) = self.attributes {
            settings.attributes = attributes;
        }
        if let Some(double_opt_in) = self.double_opt_in {
            settings.double_opt_in = double_opt_in;
        }
        if let Some(template) = self.confirmation_template_id {
            settings.confirmation_template_id = template;
        }
        if let Some(url) = self.success_redirect_url {
            settings.success_redirect_url = url;
        }
        if let Some(url) = self.confirmation_redirect_url {
            settings.confirmation_redirect_url = url;
        }
    }
}

/// The form's public key, the path segment of its hosted page (`/f/{formKey}`): its
/// account's and its own id, URL-safe base64 without padding (43 characters). Nothing in
/// it is secret; it carries the account so that every lookup names it.
pub fn form_key(account: AccountId, form: FormId) -> String {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(account.as_uuid().as_bytes());
    bytes[16..].copy_from_slice(form.as_uuid().as_bytes());
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The account and form a public key names; `None` for anything else.
pub fn parse_form_key(text: &str) -> Option<(AccountId, FormId)> {
    if text.len() != 43 {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    let account: [u8; 16] = bytes.get(..16)?.try_into().ok()?;
    let form: [u8; 16] = bytes.get(16..32)?.try_into().ok()?;
    Some((
        AccountId::from_uuid(Uuid::from_bytes(account)),
        FormId::from_uuid(Uuid::from_bytes(form)),
    ))
}

/// A post to a form as received: every field by name, values as JSON (a urlencoded
/// body's values are strings).
#[derive(Debug, Clone, Default)]
pub struct FormPost {
    /// The fields.
    pub fields: Map<String, Value>,
}

/// A post read against its form.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    /// The address.
    pub email: EmailAddress,
    /// The accepted attributes it sets.
    pub attributes: Vec<(String, AttributeValue)>,
    /// The honeypot was filled: a bot.
    pub honeypot_filled: bool,
    /// The time token, when the post carried one.
    pub time_token: Option<String>,
}

impl FormPost {
    /// Reads the post: `email` required, the form's attributes, the honeypot and the
    /// time token; any other field is refused, so a typo in an embedding page shows.
    ///
    /// # Errors
    /// Every problem, each under its field.
    pub fn parse(self, accepted: &[String]) -> Result<Submission, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let mut email = None;
        let mut attributes = Vec::new();
        let mut honeypot_filled = false;
        let mut time_token = None;
        for (name, value) in self.fields {
            if name == "email" {
                match value.as_str() {
                    Some(text) => email = errors.collect("email", EmailAddress::parse(text.trim())),
                    None => errors.push("email", "must be a string"),
                }
            } else if name == HONEYPOT_FIELD {
                honeypot_filled = value.as_str().is_none_or(|text| !text.trim().is_empty());
            } else if name == TIME_TOKEN_FIELD {
                match value.as_str() {
                    Some(text) if text.len() <= 256 => time_token = Some(text.to_owned()),
                    _ => errors.push(TIME_TOKEN_FIELD, "is not a token of this form's page"),
                }
            } else if accepted.contains(&name) {
                // An empty field of the page is a value left out.
                if value.as_str().is_some_and(|text| text.trim().is_empty()) {
                    continue;
                }
                if let Some(value) = errors.collect(&name, AttributeValue::from_json(&value)) {
                    attributes.push((name, value));
                }
            } else {
                errors.push(name, "is not a field of this form");
            }
        }
        if email.is_none() && !errors.0.iter().any(|error| error.field == "email") {
            errors.push("email", "is required");
        }
        errors.into_result()?;
        let email = email.ok_or_else(|| ValidationErrors::single("email", "is required"))?;
        Ok(Submission {
            email,
            attributes,
            honeypot_filled,
            time_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(value: Value) -> FormInput {
        let text = |key: &str| match value.get(key) {
            None => Field::Absent,
            Some(Value::Null) => Field::Null,
            Some(v) => Field::Value(v.as_str().unwrap_or_default().to_owned()),
        };
        let list = |key: &str| match value.get(key) {
            None => Field::Absent,
            Some(Value::Null) => Field::Null,
            Some(v) => Field::Value(
                v.as_array()
                    .expect("array")
                    .iter()
                    .map(|item| item.as_str().unwrap_or_default().to_owned())
                    .collect(),
            ),
        };
        FormInput {
            name: text("name"),
            topic_ids: list("topicIds"),
            attributes: list("attributes"),
            double_opt_in: match value.get("doubleOptIn") {
                None => Field::Absent,
                Some(Value::Null) => Field::Null,
                Some(v) => Field::Value(v.as_bool().expect("bool")),
            },
            confirmation_template_id: text("confirmationTemplateId"),
            success_redirect_url: text("successRedirectUrl"),
            confirmation_redirect_url: text("confirmationRedirectUrl"),
        }
    }

    #[test]
    fn a_form_needs_a_name_and_a_template_with_double_opt_in() {
        assert!(input(json!({})).parse_new().is_err());
        let form = input(json!({"name": "Newsletter"}))
            .parse_new()
            .expect("valid");
        assert!(!form.double_opt_in);
        let error = input(json!({"name": "N", "doubleOptIn": true}))
            .parse_new()
            .expect_err("no template");
        assert_eq!(error.0[0].field, "confirmationTemplateId");
        let slugs: Vec<String> = (0..21).map(|i| format!("a{i}")).collect();
        let error = input(json!({"name": "N", "attributes": slugs}))
            .parse_new()
            .expect_err("too many");
        assert_eq!(error.0[0].field, "attributes");
        let error = input(json!({"name": "N", "attributes": ["ok", "email", "1x"]}))
            .parse_new()
            .expect_err("bad slugs");
        let fields: Vec<&str> = error.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["attributes[1]", "attributes[2]"]);
        assert!(input(json!({})).parse_patch().is_err());
        assert!(input(json!({"name": null})).parse_patch().is_err());
    }

    #[test]
    fn redirects_are_http_urls_without_user_names() {
        for good in [
            "https://example.com/thanks",
            "http://example.com:8080/a?b=c#d",
        ] {
            assert!(RedirectUrl::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "javascript:alert(1)",
            "//example.com/x",
            "ftp://example.com/",
            "https://",
            "https://user@evil.example/",
            "https://example.com/a b",
            "https://example.com/\"x",
            &format!("https://example.com/{}", "a".repeat(MAX_REDIRECT_URL)),
        ] {
            assert!(RedirectUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_round_trip_and_garbage_is_refused() {
        let account = AccountId::from_uuid(Uuid::from_u128(7));
        let form = FormId::from_uuid(Uuid::from_u128(9));
        let key = form_key(account, form);
        assert_eq!(key.len(), 43);
        assert_eq!(parse_form_key(&key), Some((account, form)));
        for garbage in ["", "x", &"A".repeat(44), &"%".repeat(43)] {
            assert_eq!(parse_form_key(garbage), None, "{garbage}");
        }
    }

    #[test]
    fn posts_take_the_forms_fields_only() {
        let accepted = vec!["first_name".to_owned()];
        let post = |value: Value| FormPost {
            fields: value.as_object().expect("object").clone(),
        };
        let submission =
            post(json!({"email": " ada@example.com ", "first_name": "Ada", HONEYPOT_FIELD: ""}))
                .parse(&accepted)
                .expect("valid");
        assert_eq!(submission.email.as_str(), "ada@example.com");
        assert!(!submission.honeypot_filled);
        assert_eq!(submission.attributes.len(), 1);
        let bot = post(json!({"email": "a@example.com", HONEYPOT_FIELD: "http://spam"}))
            .parse(&accepted)
            .expect("parses");
        assert!(bot.honeypot_filled);
        let error = post(json!({"email": "a@example.com", "plan": "pro"}))
            .parse(&accepted)
            .expect_err("unknown field");
        assert_eq!(error.0[0].field, "plan");
        let error = post(json!({})).parse(&accepted).expect_err("no email");
        assert_eq!(error.0[0].field, "email");
        let long = "x".repeat(1001);
        assert!(post(json!({"email": "a@example.com", "first_name": long}))
            .parse(&accepted)
            .is_err());
    }
}
