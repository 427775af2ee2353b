//! The public pages' templates: the unsubscribe and preferences page (`/u/{token}`), the
//! page a browser gets for a link that cannot be served, and the console's sign-in form. Defaults are compiled in; the operator may replace any of
//! them with a file of the same name in the directory `MAILROOM_PAGE_TEMPLATES`, read and
//! checked once at start ([`PageTemplates::load`]): a template that does not compile, or
//! does not render in every language with the sample contexts, stops the start with a
//! message naming the file. Rendering escapes every value (HTML autoescape) and is
//! bounded by fuel, so a loop in an override cannot hold a worker.
//!
//! Each template gets `lang` (the chosen language's tag) and `t` (its catalogue, key to
//! text, see [`language`]) beside its own variables (docs/operations.md lists them).

pub mod language;

use std::{
    collections::HashMap,
    fmt,
    path::{Path, PathBuf},
};

use minijinja::{value::Kwargs, Environment, UndefinedBehavior, Value};
use serde::Serialize;

pub use language::Language;
use language::{parse_catalogue, Catalogue};

/// The instructions one render may execute. The unsubscribe page loops over at most 500
/// topics at a few dozen instructions each; this leaves room for an override's own logic.
pub const PAGE_FUEL: u64 = 500_000;

/// The largest override file read (bytes).
pub const MAX_TEMPLATE_BYTES: u64 = 256 * 1024;

/// The unsubscribe and preferences page, a whole HTML document.
pub const UNSUBSCRIBE: &str = "unsubscribe.html";
/// The console's sign-in form, the `<main>` content of the console's layout.
pub const SIGN_IN: &str = "sign_in.html";
/// A subscribe form's hosted page and its confirmation page (`/f/{formKey}`), a whole
/// HTML document.
pub const FORM: &str = "form.html";
/// What a browser gets for a public link that cannot be served (a token not minted
/// here, a contact gone, a form that does not parse), a whole HTML document.
pub const LINK_ERROR: &str = "link_error.html";

/// Every template an operator may override, with its compiled-in default.
pub const DEFAULTS: [(&str, &str); 4] = [
    (UNSUBSCRIBE, include_str!("templates/unsubscribe.html")),
    (SIGN_IN, include_str!("templates/sign_in.html")),
    (FORM, include_str!("templates/form.html")),
    (LINK_ERROR, include_str!("templates/link_error.html")),
];

/// Why the page templates could not be loaded: the server does not start.
#[derive(Debug, thiserror::Error)]
pub enum PageTemplateError {
    /// The directory or a file in it could not be read.
    #[error("page templates: cannot read {path}: {source}")]
    Read {
        /// What was read.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A file that is not one of the overridable templates.
    #[error(
        "page templates: {path} is not a page template; the overridable templates are {}",
        DEFAULTS.map(|(name, _)| name).join(", ")
    )]
    Unknown {
        /// The file.
        path: PathBuf,
    },
    /// A file larger than [`MAX_TEMPLATE_BYTES`].
    #[error("page templates: {path} is larger than {MAX_TEMPLATE_BYTES} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// A template that does not compile or does not render.
    #[error("page templates: {origin} {message}")]
    Broken {
        /// The file, or "the compiled-in NAME".
        origin: String,
        /// minijinja's error, with its line.
        message: String,
    },
    /// A compiled-in catalogue that does not parse (a build defect).
    #[error("page templates: {0}")]
    Catalogue(String),
}

/// The page templates, compiled and checked, and the catalogues.
pub struct PageTemplates {
    env: Environment<'static>,
    catalogues: HashMap<Language, (Catalogue, Value)>,
    overridden: Vec<String>,
}

impl fmt::Debug for PageTemplates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageTemplates")
            .field("overridden", &self.overridden)
            .finish_non_exhaustive()
    }
}

impl PageTemplates {
    /// The compiled-in defaults, replaced by the files of `directory` (if given) that
    /// carry a default's name, then every template checked by rendering it in every
    /// language with sample contexts.
    ///
    /// # Errors
    /// [`PageTemplateError`] naming the file and the reason.
    pub fn load(directory: Option<&Path>) -> Result<Self, PageTemplateError> {
        let mut sources: Vec<(&'static str, String, String)> = DEFAULTS
            .iter()
            .map(|(name, source)| {
                (
                    *name,
                    (*source).to_owned(),
                    format!("the compiled-in {name}"),
                )
            })
            .collect();
        let mut overridden = Vec::new();
        if let Some(directory) = directory {
            for (name, source, path) in read_overrides(directory)? {
                if let Some(entry) = sources.iter_mut().find(|(known, _, _)| *known == name) {
                    entry.1 = source;
                    entry.2 = path.display().to_string();
                    overridden.push(name.to_owned());
                }
            }
        }
        let mut env = Environment::new();
        // `.html` names escape every value (minijinja's default callback).
        env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
        env.set_fuel(Some(PAGE_FUEL));
        env.add_filter("fill", fill);
        let mut origins = HashMap::new();
        for (name, source, origin) in sources {
            env.add_template_owned(name, source)
                .map_err(|error| broken(&origin, &error))?;
            origins.insert(name, origin);
        }
        let mut catalogues = HashMap::new();
        for language in Language::ALL {
            let catalogue = parse_catalogue(language).map_err(PageTemplateError::Catalogue)?;
            let value = Value::from_serialize(&catalogue);
            catalogues.insert(language, (catalogue, value));
        }
        let pages = Self {
            env,
            catalogues,
            overridden,
        };
        pages.check(&origins)?;
        Ok(pages)
    }

    /// The names of the templates the operator replaced.
    pub fn overridden(&self) -> &[String] {
        &self.overridden
    }

    /// The text of `key` in `language` (English, then the key itself, when missing:
    /// the catalogue test keeps that from happening).
    pub fn text(&self, language: Language, key: &str) -> String {
        [language, Language::En]
            .iter()
            .find_map(|language| self.catalogues.get(language)?.0.get(key).cloned())
            .unwrap_or_else(|| key.to_owned())
    }

    /// The catalogue of `language`, as a template value.
    pub fn catalogue(&self, language: Language) -> Value {
        self.catalogues
            .get(&language)
            .map(|(_, value)| value.clone())
            .unwrap_or_default()
    }

    /// Renders template `name` in `language` with `context` (plus `lang` and `t`).
    ///
    /// # Errors
    /// minijinja's error, for example when fuel runs out.
    pub fn render(
        &self,
        name: &str,
        language: Language,
        context: impl Serialize,
    ) -> Result<String, minijinja::Error> {
        self.env.get_template(name)?.render(minijinja::context! {
            lang => language.tag(),
            t => self.catalogue(language),
            ..Value::from_serialize(&context)
        })
    }

    /// Renders every template in every language with the sample contexts, so an
    /// override that names a missing variable or filter fails at start, not on a page.
    fn check(&self, origins: &HashMap<&'static str, String>) -> Result<(), PageTemplateError> {
        for language in Language::ALL {
            for (name, context) in samples() {
                self.render(name, language, &context).map_err(|error| {
                    let origin = origins.get(name).map_or(name, String::as_str);
                    broken(origin, &error)
                })?;
            }
        }
        Ok(())
    }
}

fn broken(origin: &str, error: &minijinja::Error) -> PageTemplateError {
    let mut message = error.to_string();
    if let Some(line) = error.line() {
        if !message.contains("line") {
            message = format!("(line {line}): {message}");
        }
    }
    PageTemplateError::Broken {
        origin: origin.to_owned(),
        message,
    }
}

/// The override files of `directory`: each must be a default's name; hidden files
/// (editor and version-control leftovers) are skipped.
fn read_overrides(
    directory: &Path,
) -> Result<Vec<(&'static str, String, PathBuf)>, PageTemplateError> {
    let read_error = |path: &Path| {
        let path = path.to_owned();
        move |source| PageTemplateError::Read { path, source }
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(directory).map_err(read_error(directory))? {
        let path = entry.map_err(read_error(directory))?.path();
        let file_name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        if file_name.starts_with('.') {
            continue;
        }
        let Some((name, _)) = DEFAULTS.iter().find(|(name, _)| *name == file_name) else {
            return Err(PageTemplateError::Unknown { path });
        };
        let size = std::fs::metadata(&path).map_err(read_error(&path))?.len();
        if size > MAX_TEMPLATE_BYTES {
            return Err(PageTemplateError::TooLarge { path });
        }
        let source = std::fs::read_to_string(&path).map_err(read_error(&path))?;
        found.push((*name, source, path));
    }
    Ok(found)
}

/// `{{ t.key | fill(name=value, …) }}`: the catalogue text with each `{name}` replaced
/// by its value (escaped with the rest of the output, since the result is not safe).
fn fill(text: String, values: Kwargs) -> Result<String, minijinja::Error> {
    let mut filled = text;
    for name in values.args() {
        let value: Value = values.get(name)?;
        filled = filled.replace(&format!("{{{name}}}"), &value.to_string());
    }
    values.assert_all_used()?;
    Ok(filled)
}

/// What the unsubscribe page gets.
#[derive(Debug, Clone, Serialize)]
pub struct UnsubscribeContext {
    /// The sender: the account's display name, else its name.
    pub sender: String,
    /// The contact's address.
    pub email: String,
    /// The account's branding (each part `null` when unset).
    pub branding: BrandingContext,
    /// The colour of the header band and buttons (the accent, or the page's own).
    pub accent: String,
    /// The text colour on `accent` (white or black, at least 4.5:1).
    pub on_accent: String,
    /// The outcome of a post, in the page's language; `null` on a `GET`.
    pub notice: Option<String>,
    /// Whether the contact is unsubscribed from everything.
    pub unsubscribed: bool,
    /// The account's topics.
    pub topics: Vec<TopicContext>,
}

/// The branding as the template sees it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BrandingContext {
    /// The display name.
    pub display_name: Option<String>,
    /// The logo URL (https).
    pub logo_url: Option<String>,
    /// The accent colour, `#rrggbb`.
    pub accent_color: Option<String>,
}

impl BrandingContext {
    /// An account's branding as the templates see it.
    pub fn of(branding: &mailroom_domain::branding::Branding) -> Self {
        Self {
            display_name: branding
                .display_name
                .as_ref()
                .map(|name| name.as_str().to_owned()),
            logo_url: branding
                .logo_url
                .as_ref()
                .map(|url| url.as_str().to_owned()),
            accent_color: branding.accent_color.map(|color| color.to_hex()),
        }
    }
}

/// One topic on the unsubscribe page.
#[derive(Debug, Clone, Serialize)]
pub struct TopicContext {
    /// The form value.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Whether the contact left it.
    pub unsubscribed: bool,
}

/// What a form's page gets.
#[derive(Debug, Clone, Serialize)]
pub struct FormContext {
    /// `form` (the form), `sent` (after a post), `confirm` (the confirmation link's
    /// page), `confirmed` or `already_confirmed`.
    pub mode: &'static str,
    /// The sender: the account's display name, else its name.
    pub sender: String,
    /// The account's branding (each part `null` when unset).
    pub branding: BrandingContext,
    /// The colour of the header band and buttons.
    pub accent: String,
    /// The text colour on `accent`.
    pub on_accent: String,
    /// The names of the topics the form subscribes to.
    pub topics: Vec<String>,
    /// The attribute slugs the form accepts, one text field each.
    pub attributes: Vec<String>,
    /// The signed time token of the hidden `form-token` field.
    pub time_token: String,
    /// The outcome of a post, in the page's language; `null` otherwise.
    pub notice: Option<String>,
}

/// What the sign-in form gets.
#[derive(Debug, Clone, Serialize)]
pub struct SignInContext {
    /// The form's anti-forgery token (a hidden field).
    pub form_token: String,
    /// Why the last attempt failed, in the page's language.
    pub error: Option<String>,
}

/// What the link error page gets: which catalogue texts to show, and the page's colours.
/// A link that does not verify names no account the page could trust, so it carries the
/// service's own accent, not an account's branding.
#[derive(Debug, Clone, Serialize)]
pub struct LinkErrorContext {
    /// The catalogue key of the heading (and title).
    pub title: &'static str,
    /// The catalogue key of the explanation.
    pub explanation: &'static str,
    /// The colour of the header band.
    pub accent: String,
    /// The text colour on `accent`.
    pub on_accent: String,
}

/// The contexts every template is checked with: each branch of the defaults.
fn samples() -> Vec<(&'static str, Value)> {
    let topic = |unsubscribed, description: Option<&str>| TopicContext {
        id: "00000000-0000-0000-0000-000000000000".into(),
        name: "News".into(),
        description: description.map(str::to_owned),
        unsubscribed,
    };
    let page = |branding: BrandingContext, notice: Option<&str>, unsubscribed, topics| {
        Value::from_serialize(UnsubscribeContext {
            sender: "Example".into(),
            email: "reader@example.com".into(),
            branding,
            accent: "#0b4fb3".into(),
            on_accent: "#ffffff".into(),
            notice: notice.map(str::to_owned),
            unsubscribed,
            topics,
        })
    };
    let branded = BrandingContext {
        display_name: Some("Example".into()),
        logo_url: Some("https://example.com/logo.png".into()),
        accent_color: Some("#0b4fb3".into()),
    };
    let form = |mode: &'static str, notice: Option<&str>, branding: BrandingContext| {
        Value::from_serialize(FormContext {
            mode,
            sender: "Example".into(),
            branding,
            accent: "#0b4fb3".into(),
            on_accent: "#ffffff".into(),
            topics: vec!["News".into()],
            attributes: vec!["first_name".into()],
            time_token: "token".into(),
            notice: notice.map(str::to_owned),
        })
    };
    vec![
        (FORM, form("form", None, branded.clone())),
        (
            FORM,
            form("form", Some("Refused."), BrandingContext::default()),
        ),
        (
            FORM,
            form("sent", Some("Thanks."), BrandingContext::default()),
        ),
        (FORM, form("confirm", None, BrandingContext::default())),
        (FORM, form("confirmed", None, BrandingContext::default())),
        (
            FORM,
            form("already_confirmed", None, BrandingContext::default()),
        ),
        (
            UNSUBSCRIBE,
            page(
                BrandingContext::default(),
                None,
                false,
                vec![topic(false, Some("Weekly")), topic(true, None)],
            ),
        ),
        (UNSUBSCRIBE, page(branded, Some("Saved."), true, Vec::new())),
        (
            SIGN_IN,
            Value::from_serialize(SignInContext {
                form_token: "token".into(),
                error: None,
            }),
        ),
        (
            LINK_ERROR,
            Value::from_serialize(LinkErrorContext {
                title: "link_invalid_title",
                explanation: "link_invalid_text",
                accent: "#0b4fb3".into(),
                on_accent: "#ffffff".into(),
            }),
        ),
        (
            SIGN_IN,
            Value::from_serialize(SignInContext {
                form_token: "token".into(),
                error: Some("Refused.".into()),
            }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_render_in_every_language_and_escape() {
        let pages = PageTemplates::load(None).expect("defaults load");
        let html = pages
            .render(
                UNSUBSCRIBE,
                Language::De,
                UnsubscribeContext {
                    sender: "<script>x</script>".into(),
                    email: "a&b@example.com".into(),
                    branding: BrandingContext::default(),
                    accent: "#0b4fb3".into(),
                    on_accent: "#ffffff".into(),
                    notice: None,
                    unsubscribed: false,
                    topics: Vec::new(),
                },
            )
            .expect("renders");
        assert!(html.contains("<html lang=\"de\">"));
        assert!(html.contains("E-Mail-Einstellungen"));
        assert!(!html.contains("<script>"));
        assert!(html.contains("&lt;script&gt;"));
        assert!(html.contains("a&amp;b@example.com"));
    }

    #[test]
    fn overrides_replace_defaults_and_broken_ones_are_refused() {
        let directory =
            std::env::temp_dir().join(format!("mailroom-page-templates-{}", std::process::id()));
        std::fs::create_dir_all(&directory).expect("temp dir");
        let file = directory.join(UNSUBSCRIBE);
        std::fs::write(
            &file,
            "<p lang=\"{{ lang }}\">{{ sender }} {{ t.notice_saved }}</p>",
        )
        .expect("write");
        let pages = PageTemplates::load(Some(&directory)).expect("loads");
        assert_eq!(pages.overridden(), [UNSUBSCRIBE]);

        std::fs::write(&file, "{% for %}").expect("write");
        let error = PageTemplates::load(Some(&directory)).expect_err("refused");
        assert!(
            error.to_string().contains(&file.display().to_string()),
            "{error}"
        );

        std::fs::write(&file, "{{ sender | no_such_filter }}").expect("write");
        let error = PageTemplates::load(Some(&directory)).expect_err("refused");
        assert!(error.to_string().contains("no_such_filter"), "{error}");

        std::fs::write(&file, "{{ t.no_such_key }}").expect("write");
        assert!(PageTemplates::load(Some(&directory)).is_err());

        std::fs::remove_file(&file).expect("remove");
        std::fs::write(directory.join("unsubscribe.htm"), "x").expect("write");
        let error = PageTemplates::load(Some(&directory)).expect_err("refused");
        assert!(
            error
                .to_string()
                .contains("unsubscribe.html, sign_in.html, form.html, link_error.html"),
            "{error}"
        );
        std::fs::remove_dir_all(&directory).expect("clean up");
    }

    #[test]
    fn fill_replaces_placeholders() {
        let pages = PageTemplates::load(None).expect("defaults load");
        assert_eq!(
            pages.text(Language::Fr, "preferences_intro"),
            "E-mails de {sender} à {email}."
        );
        let mut env = Environment::new();
        env.add_filter("fill", fill);
        let rendered = env
            .render_str("{{ 'A {x} B' | fill(x='1') }}", ())
            .expect("renders");
        assert_eq!(rendered, "A 1 B");
    }
}
