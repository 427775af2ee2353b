//! The root span of every request (tracing-actix-web), with the secret segments of the
//! request target redacted.
//!
//! Open-tracking, click-tracking and unsubscribe links carry their token in the path
//! (`/t/o/{token}`, `/t/c/{token}`, `/u/{token}`). Whoever holds such a token can record
//! opens and clicks or unsubscribe the recipient, so it must not reach log storage, where
//! more people read than the recipient's mailbox. Every event logged while a request runs
//! carries the root span's fields, so the target is redacted there, once, for all of them.

use std::borrow::Cow;

use actix_web::{
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    Error, HttpMessage,
};
use tracing::Span;
use tracing_actix_web::{DefaultRootSpanBuilder, RequestId, RootSpanBuilder, TracingLogger};

/// What a redacted path segment is logged as.
pub const REDACTED: &str = "[redacted]";

/// The request-logging middleware: tracing-actix-web's, with [`RedactedTargetSpan`].
pub fn access_logger() -> TracingLogger<RedactedTargetSpan> {
    TracingLogger::new()
}

/// tracing-actix-web's default root span, except that `http.target` is [`redact_target`]ed.
/// `http.route` is the route's pattern (`/t/o/{token}`), which holds no token.
#[derive(Debug, Clone, Copy)]
pub struct RedactedTargetSpan;

impl RootSpanBuilder for RedactedTargetSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        let route = request
            .match_pattern()
            .unwrap_or_else(|| "default".to_owned());
        let user_agent = request
            .headers()
            .get("User-Agent")
            .and_then(|value| value.to_str().ok())
            .unwrap_or("");
        let target = request
            .uri()
            .path_and_query()
            .map_or("", |target| target.as_str());
        let connection = request.connection_info();
        let request_id = request
            .extensions()
            .get::<RequestId>()
            .map(ToString::to_string)
            .unwrap_or_default();
        tracing::info_span!(
            "HTTP request",
            http.method = %request.method(),
            http.route = %route,
            http.flavor = ?request.version(),
            http.scheme = %connection.scheme(),
            http.host = %connection.host(),
            http.client_ip = %connection.realip_remote_addr().unwrap_or(""),
            http.user_agent = %user_agent,
            http.target = %redact_target(target),
            http.status_code = tracing::field::Empty,
            otel.name = %format!("{} {route}", request.method()),
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            request_id = %request_id,
            exception.message = tracing::field::Empty,
            exception.details = tracing::field::Empty,
        )
    }

    fn on_request_end<B: MessageBody>(span: Span, outcome: &Result<ServiceResponse<B>, Error>) {
        DefaultRootSpanBuilder::on_request_end(span, outcome);
    }
}

/// The request target (path and query) with the token of a tracking (`/t/…`),
/// unsubscribe (`/u/…`) or form confirmation (`/f/{formKey}/confirm/…`) link, or the secret of a console login link (`/console/login/…`),
/// replaced by [`REDACTED`]: everything after `/t/<kind>/`, `/u/` or `/console/login/`,
/// query included, since what follows is the token or something a client appended
/// to it. Other targets are returned as they are.
///
/// ```
/// use mailroom_http::access_log::redact_target;
///
/// assert_eq!(redact_target("/t/o/abc.def"), "/t/o/[redacted]");
/// assert_eq!(redact_target("/u/abc.def?x=1"), "/u/[redacted]");
/// assert_eq!(redact_target("/f/key/confirm/abc"), "/f/key/confirm/[redacted]");
/// assert_eq!(redact_target("/f/key"), "/f/key");
/// assert_eq!(redact_target("/v2/accounts?limit=5"), "/v2/accounts?limit=5");
/// ```
pub fn redact_target(target: &str) -> Cow<'_, str> {
    let kept = if let Some(rest) = target.strip_prefix("/t/") {
        // `/t/o/`, `/t/c/`, or any other kind: keep the kind, drop what follows it.
        match rest.find(['/', '?']) {
            Some(end) if rest[end..].starts_with('/') => 3 + end + 1,
            _ => 3,
        }
    } else if target.starts_with("/u/") {
        3
    } else if let Some(at) = target
        .strip_prefix("/f/")
        .and_then(|rest| rest.find("/confirm/"))
    {
        // A form's confirmation link: its token confirms a subscription. The form's
        // key before it is public.
        3 + at + "/confirm/".len()
    } else if target.starts_with("/console/login/") {
        // A console login link: its secret signs someone in once.
        "/console/login/".len()
    } else {
        return Cow::Borrowed(target);
    };
    if kept == target.len() {
        return Cow::Borrowed(target);
    }
    Cow::Owned(format!("{}{REDACTED}", &target[..kept]))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use actix_web::{test as actix_test, web, App, HttpResponse};
    use tracing_subscriber::fmt::format::FmtSpan;

    use super::*;

    #[test]
    fn tracking_and_unsubscribe_tokens_are_redacted_and_other_targets_kept() {
        let cases = [
            ("/t/o/eyJ0b2tlbiI.c2lnbmF0dXJl", "/t/o/[redacted]"),
            ("/t/c/eyJ0b2tlbiI.c2ln?utm=1", "/t/c/[redacted]"),
            ("/t/x/secret/more", "/t/x/[redacted]"),
            ("/t/secret", "/t/[redacted]"),
            ("/t/secret?q=1", "/t/[redacted]"),
            ("/u/eyJ0b2tlbiI.c2lnbmF0dXJl", "/u/[redacted]"),
            ("/u/secret?List-Unsubscribe=One-Click", "/u/[redacted]"),
            ("/u/", "/u/"),
            ("/console/login/c2VjcmV0", "/console/login/[redacted]"),
            ("/console/accounts", "/console/accounts"),
            ("/t/o/", "/t/o/"),
            (
                "/v2/accounts/01/contacts?limit=5",
                "/v2/accounts/01/contacts?limit=5",
            ),
            ("/tokens/x", "/tokens/x"),
            ("/unsubscribe", "/unsubscribe"),
        ];
        for (target, expected) in cases {
            assert_eq!(redact_target(target), expected, "{target}");
        }
    }

    /// Log output collected in memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("log buffer").extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    async fn log_inside_the_request(token: web::Path<String>) -> HttpResponse {
        // As the tracking handlers do when recording fails; the token is not a field here,
        // only the span's target could carry it.
        tracing::warn!(length = token.len(), "an open could not be recorded");
        HttpResponse::Ok().finish()
    }

    #[actix_web::test]
    async fn request_logs_of_tracking_and_unsubscribe_links_do_not_contain_the_token() {
        const TOKEN: &str = "s3cr3tTOKENv4lu3.sig";
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_span_events(FmtSpan::CLOSE)
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);

        let app = actix_test::init_service(
            App::new()
                .route("/t/o/{token}", web::get().to(log_inside_the_request))
                .route("/u/{token}", web::get().to(log_inside_the_request))
                .route("/u/{token}", web::post().to(log_inside_the_request))
                .wrap(access_logger()),
        )
        .await;
        for (method, uri) in [
            (actix_web::http::Method::GET, format!("/t/o/{TOKEN}")),
            (actix_web::http::Method::GET, format!("/u/{TOKEN}")),
            (
                actix_web::http::Method::POST,
                format!("/u/{TOKEN}?List-Unsubscribe=One-Click"),
            ),
            (actix_web::http::Method::GET, format!("/t/c/{TOKEN}")),
        ] {
            let request = actix_test::TestRequest::default()
                .method(method)
                .uri(&uri)
                .to_request();
            actix_test::call_service(&app, request).await;
        }

        let logs =
            String::from_utf8(captured.0.lock().expect("log buffer").clone()).expect("UTF-8 logs");
        assert!(
            !logs.contains("s3cr3t"),
            "a token reached the logs:\n{logs}"
        );
        // The requests were logged, with their targets redacted.
        assert_eq!(
            logs.matches("an open could not be recorded").count(),
            3,
            "{logs}"
        );
        assert!(logs.contains("http.target=/t/o/[redacted]"), "{logs}");
        assert!(logs.contains("http.target=/u/[redacted]"), "{logs}");
        assert!(logs.contains("http.route=/t/o/{token}"), "{logs}");
        assert!(logs.contains("http.target=/t/c/[redacted]"), "{logs}");
    }
}
