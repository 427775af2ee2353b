//! The browsable API reference at `/docs`: an HTML page whose scripts and styles all come
//! from Mailroom itself (it must work offline, with no CDN), reading `/v2/openapi.json`.

use mailroom_tests::spawn_app;
use reqwest::{header, redirect, Method};

/// The values of every `src="…"` and `href="…"` attribute in `html`.
fn asset_references(html: &str) -> Vec<String> {
    let mut references = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        let mut rest = html;
        while let Some(start) = rest.find(attribute) {
            let value = &rest[start + attribute.len()..];
            let end = value.find('"').unwrap_or(value.len());
            references.push(value[..end].to_owned());
            rest = &value[end..];
        }
    }
    references
}

#[tokio::test]
async fn docs_serves_an_offline_api_reference_reading_the_served_document() {
    let app = spawn_app().await;

    let no_redirects = reqwest::Client::builder()
        .redirect(redirect::Policy::none())
        .build()
        .expect("client");
    let bare = no_redirects
        .get(format!("{}/docs", app.address))
        .send()
        .await
        .expect("GET /docs");
    assert!(
        bare.status().is_redirection(),
        "GET /docs: {}",
        bare.status()
    );
    assert_eq!(
        bare.headers()
            .get(header::LOCATION)
            .map(|value| value.as_bytes()),
        Some(&b"/docs/"[..])
    );

    let page = app
        .request(Method::GET, "/docs/", None)
        .send()
        .await
        .expect("GET /docs/");
    assert_eq!(page.status(), 200);
    // A policy of its own: scripts, styles and images from this server only, no framing.
    let policy = page.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .expect("ascii")
        .to_owned();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(policy.contains(directive), "{directive} not in {policy}");
    }
    assert!(!policy.contains("unsafe-eval"), "{policy}");
    assert_eq!(page.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    let content_type = page.headers()[header::CONTENT_TYPE]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let html = page.text().await.expect("body");

    let references = asset_references(&html);
    assert!(
        references
            .iter()
            .any(|reference| reference.ends_with(".js")),
        "the page loads no script: {html}"
    );
    assert!(
        references
            .iter()
            .any(|reference| reference.ends_with(".css")),
        "the page loads no style sheet: {html}"
    );
    for reference in &references {
        assert!(
            !reference.contains("//"),
            "{reference} is not served by Mailroom (the page must work offline)"
        );
        let path = format!("/docs/{}", reference.trim_start_matches("./"));
        let asset = app
            .request(Method::GET, &path, None)
            .send()
            .await
            .expect("GET an asset");
        assert_eq!(asset.status(), 200, "GET {path}");
        assert!(
            !asset.bytes().await.expect("asset body").is_empty(),
            "{path} is empty"
        );
    }

    // The script that starts Swagger UI points it at the document this server serves,
    // and at no validator service elsewhere.
    let initializer = app
        .request(Method::GET, "/docs/swagger-initializer.js", None)
        .send()
        .await
        .expect("GET the initializer");
    assert_eq!(initializer.status(), 200);
    let initializer = initializer.text().await.expect("body");
    assert!(
        initializer.contains("\"/v2/openapi.json\""),
        "{initializer}"
    );
    assert!(!initializer.contains("http"), "{initializer}");
    let document = app
        .request(Method::GET, "/v2/openapi.json", None)
        .send()
        .await
        .expect("GET the document");
    assert_eq!(document.status(), 200);
}
