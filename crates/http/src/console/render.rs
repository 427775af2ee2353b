//! The console's templates, compiled into the binary, and the page helpers around them:
//! every page goes out with the same security headers.

use std::sync::OnceLock;

use actix_web::{
    http::{header, StatusCode},
    HttpResponse,
};
use mailroom_domain::message::{DailyStats, StatsCounter};
use minijinja::Environment;
use serde::Serialize;

/// The stylesheet, served at `/console/static/console.css`.
pub const STYLESHEET: &str = include_str!("templates/console.css");

/// htmx, vendored (see `vendor/README.md`), served at `/console/static/htmx.min.js`.
pub const HTMX: &str = include_str!("vendor/htmx-2.0.4.min.js");

/// The visual editor of `wysiwyg` templates, served at `/console/static/editor.js`.
pub const EDITOR: &str = include_str!("templates/editor.js");

/// Every template, by name.
/// (The sign-in form is a public page the operator may override: `crate::pages`.)
const TEMPLATES: [(&str, &str); 17] = [
    ("base.html", include_str!("templates/base.html")),
    (
        "condition_rows.html",
        include_str!("templates/condition_rows.html"),
    ),
    ("login_link.html", include_str!("templates/login_link.html")),
    ("message.html", include_str!("templates/message.html")),
    ("confirm.html", include_str!("templates/confirm.html")),
    ("accounts.html", include_str!("templates/accounts.html")),
    ("dashboard.html", include_str!("templates/dashboard.html")),
    ("tokens.html", include_str!("templates/tokens.html")),
    ("templates.html", include_str!("templates/templates.html")),
    (
        "template_form.html",
        include_str!("templates/template_form.html"),
    ),
    // Announcements, mail servers (consoleapi).
    (
        "announcements.html",
        include_str!("templates/announcements.html"),
    ),
    (
        "announcement_form.html",
        include_str!("templates/announcement_form.html"),
    ),
    (
        "announcement.html",
        include_str!("templates/announcement.html"),
    ),
    (
        "announcement_review.html",
        include_str!("templates/announcement_review.html"),
    ),
    (
        "announcement_progress.html",
        include_str!("templates/announcement_progress.html"),
    ),
    (
        "mail_servers.html",
        include_str!("templates/mail_servers.html"),
    ),
    (
        "mail_server_form.html",
        include_str!("templates/mail_server_form.html"),
    ),
];

pub(super) fn environment() -> &'static Environment<'static> {
    static ENVIRONMENT: OnceLock<Environment<'static>> = OnceLock::new();
    ENVIRONMENT.get_or_init(|| {
        let mut env = Environment::new();
        // `.html` names turn on HTML escaping of every value (minijinja's default).
        for (name, source) in TEMPLATES
            .into_iter()
            .chain(crate::console::extra_templates::EXTRA)
        {
            if let Err(error) = env.add_template(name, source) {
                // The templates are compiled in; a broken one fails the console's tests.
                tracing::error!(%error, name, "console template does not compile");
            }
        }
        env.add_function("condition_rows", condition_rows);
        env
    })
}

/// Renders `condition_rows.html`, the condition rows two pages share. A function rather
/// than `{% include %}`: the console's minijinja is built without multi-template support,
/// which tenant templates would then reach too.
fn condition_rows(
    state: &minijinja::State,
    rows: minijinja::Value,
    operators: minijinja::Value,
    slug_list: Option<String>,
) -> Result<minijinja::Value, minijinja::Error> {
    let html = state
        .env()
        .get_template("condition_rows.html")?
        .render(minijinja::context! { rows, operators, slug_list })?;
    // Escaped by its own rendering.
    Ok(minijinja::Value::from_safe_string(html))
}

/// A rendered page; unlike a response it can be made on the blocking pool.
#[derive(Debug)]
pub struct Page {
    status: StatusCode,
    html: String,
}

impl From<Page> for HttpResponse {
    fn from(page: Page) -> Self {
        html_response(page.status, page.html)
    }
}

/// Renders `template` with `context` inside the layout (`base.html`, which reads the same
/// context) as a page with `status`.
pub fn page(status: StatusCode, template: &str, context: impl Serialize) -> Page {
    let env = environment();
    let context = minijinja::Value::from_serialize(&context);
    let rendered = env
        .get_template(template)
        .and_then(|body| body.render(&context));
    finish(status, template, rendered, context)
}

/// Puts `body`, rendered elsewhere (a public page template, `crate::pages`), inside the
/// layout with `context` (which may carry `lang` and `t`, the page's language and
/// catalogue, for the layout's own words).
pub fn layout(
    status: StatusCode,
    template: &str,
    body: Result<String, minijinja::Error>,
    context: impl Serialize,
) -> Page {
    finish(
        status,
        template,
        body,
        minijinja::Value::from_serialize(&context),
    )
}

fn finish(
    status: StatusCode,
    template: &str,
    body: Result<String, minijinja::Error>,
    context: minijinja::Value,
) -> Page {
    let rendered = body.and_then(|body| {
        environment()
            .get_template("base.html")?
            .render(minijinja::context! {
                // Already escaped by its own rendering.
                content => minijinja::Value::from_safe_string(body),
                ..context
            })
    });
    match rendered {
        Ok(html) => Page { status, html },
        Err(error) => {
            tracing::error!(%error, template, "console page failed to render");
            Page {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                html: "<!doctype html><html lang=\"en\"><title>Error</title><main><h1>Error</h1>\
                       <p>The page could not be rendered.</p></main></html>"
                    .to_owned(),
            }
        }
    }
}

/// Renders `template` alone, without the layout: a part of a page that htmx puts in
/// place (it goes out with the same headers as a page).
pub fn fragment(status: StatusCode, template: &str, context: impl Serialize) -> Page {
    match environment()
        .get_template(template)
        .and_then(|fragment| fragment.render(context))
    {
        Ok(html) => Page { status, html },
        Err(error) => {
            tracing::error!(%error, template, "console fragment failed to render");
            Page {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                html: "<p>The result could not be shown.</p>".to_owned(),
            }
        }
    }
}

/// Renders `template` for inclusion in a page (this minijinja build has no `include`):
/// a safe string the page template writes as is.
pub fn partial(template: &str, context: impl Serialize) -> minijinja::Value {
    // A failed render is logged by `fragment` and shows its short notice in the page.
    minijinja::Value::from_safe_string(fragment(StatusCode::OK, template, context).html)
}

/// Every console response: no caching, no framing, no referrer to other sites (a login
/// link's secret is in its URL; `same-origin` rather than `no-referrer`, under which
/// browsers send `Origin: null` and the same-origin check could not tell), and a policy that allows only the console's own stylesheet, script (htmx,
/// which talks only to this origin) and forms.
pub fn secure_headers(response: &mut actix_web::HttpResponseBuilder) {
    response
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; \
             img-src 'self' data:; frame-src 'self'; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::REFERRER_POLICY, "same-origin"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"));
}

fn html_response(status: StatusCode, html: String) -> HttpResponse {
    let mut response = HttpResponse::build(status);
    secure_headers(&mut response);
    response.content_type("text/html; charset=utf-8").body(html)
}

/// The dashboard's chart: one polyline per counter over the days, scaled to the peak.
#[derive(Debug, Serialize)]
pub struct Chart {
    width: u32,
    height: u32,
    peak: u64,
    first_day: String,
    last_day: String,
    series: Vec<Series>,
    rows: Vec<Row>,
}

#[derive(Debug, Serialize)]
struct Series {
    label: &'static str,
    colour: &'static str,
    total: u64,
    points: String,
}

#[derive(Debug, Serialize)]
struct Row {
    day: String,
    values: Vec<u64>,
}

/// The counters the chart shows, with colours distinct from each other and at least 3:1
/// against the chart's background.
const CHARTED: [(StatsCounter, &str, &str); 6] = [
    (StatsCounter::Sent, "Sent", "#0b4fb3"),
    (StatsCounter::Bounced, "Bounced", "#a4161a"),
    (StatsCounter::Complained, "Complained", "#7a1fa2"),
    (StatsCounter::Opened, "Opened", "#1d6b2f"),
    (StatsCounter::Clicked, "Clicked", "#b35c00"),
    (StatsCounter::Unsubscribed, "Unsubscribed", "#4d4d4d"),
];

impl Chart {
    /// Builds the chart of `days` (oldest first).
    #[must_use]
    pub fn new(days: &[DailyStats]) -> Self {
        const WIDTH: u32 = 600;
        const HEIGHT: u32 = 200;
        let peak = days
            .iter()
            .flat_map(|day| CHARTED.iter().map(|(counter, _, _)| day.get(*counter)))
            .max()
            .unwrap_or(0);
        let scale = peak.max(1) as f64;
        let step = if days.len() > 1 {
            f64::from(WIDTH) / (days.len() - 1) as f64
        } else {
            0.0
        };
        let series = CHARTED
            .iter()
            .map(|(counter, label, colour)| Series {
                label,
                colour,
                total: days.iter().map(|day| day.get(*counter)).sum(),
                points: days
                    .iter()
                    .enumerate()
                    .map(|(index, day)| {
                        let x = step * index as f64;
                        let y = f64::from(HEIGHT) * (1.0 - day.get(*counter) as f64 / scale);
                        format!("{x:.1},{y:.1}")
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
            })
            .collect();
        let rows = days
            .iter()
            .rev()
            .map(|day| Row {
                day: day.day.to_string(),
                values: CHARTED
                    .iter()
                    .map(|(counter, _, _)| day.get(*counter))
                    .collect(),
            })
            .collect();
        Self {
            width: WIDTH,
            height: HEIGHT,
            peak,
            first_day: days.first().map(|d| d.day.to_string()).unwrap_or_default(),
            last_day: days.last().map(|d| d.day.to_string()).unwrap_or_default(),
            series,
            rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    #[test]
    fn every_template_compiles_and_escapes() {
        let mut env = Environment::new();
        for (name, source) in TEMPLATES
            .into_iter()
            .chain(crate::console::extra_templates::EXTRA)
        {
            if let Err(error) = env.add_template(name, source) {
                panic!("{name}: {error:#}");
            }
        }
        let html = environment()
            .get_template("message.html")
            .and_then(|t| {
                t.render(minijinja::context! {
                    title => "<b>x</b>", message => "a & b", back_href => "/console",
                    back_label => "Back",
                })
            })
            .expect("renders");
        assert!(
            html.contains("&lt;b&gt;x&lt;&#x2f;b&gt;") || html.contains("&lt;b&gt;x&lt;/b&gt;")
        );
        assert!(html.contains("a &amp; b"));
        for name in [
            "login_link.html",
            "accounts.html",
            "dashboard.html",
            "tokens.html",
            "templates.html",
            "template_form.html",
        ] {
            if let Err(error) = environment().get_template(name) {
                panic!("{name}: {error:#}");
            }
        }
    }

    #[test]
    fn the_chart_scales_to_the_peak_day() {
        let mut first = DailyStats::zero(date!(2026 - 11 - 01));
        first.set(StatsCounter::Sent, 4);
        let mut second = DailyStats::zero(date!(2026 - 11 - 02));
        second.set(StatsCounter::Sent, 8);
        let chart = Chart::new(&[first, second]);
        assert_eq!(chart.peak, 8);
        assert_eq!(chart.series[0].points, "0.0,100.0 600.0,0.0");
        assert_eq!(chart.series[0].total, 12);
        assert_eq!(chart.rows[0].day, "2026-11-02");
    }
}
