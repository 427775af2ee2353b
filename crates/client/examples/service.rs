//! A small product backend that uses Mailroom through `mailroom-client`:
//!
//! - `POST /signup` `{"email": "…", "plan": "…"}` records a `signed_up` event (Mailroom's
//!   automations on it send their mail) and sends the `welcome` template as a
//!   transactional message, keyed by the address so a repeated sign-up mails once;
//! - `POST /webhooks/mailroom` verifies a webhook delivery's signature before trusting
//!   its body, and answers 400 to anything not signed by Mailroom.
//!
//! ```text
//! MAILROOM_URL=https://mailroom.example.com MAILROOM_TOKEN=mailroom_pat_… \
//! MAILROOM_ACCOUNT=0193… MAILROOM_WEBHOOK_SECRET=whsec_… \
//!     cargo run -p mailroom-client --example service
//! ```
//!
//! A `sending` token is enough (`create_token` with scope `sending`): this service only
//! records events and sends.

use std::time::Duration;

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use mailroom_client::webhooks::{verify_delivery, WebhookHeaders};
use mailroom_client::{AccountId, Client, Error, NewEvent, SendMessage};
use serde_json::json;

struct Mailroom {
    client: Client,
    account: AccountId,
    webhook_secret: String,
}

#[derive(serde::Deserialize)]
struct Signup {
    email: String,
    plan: String,
}

async fn signup(mailroom: web::Data<Mailroom>, body: web::Json<Signup>) -> HttpResponse {
    let Signup { email, plan } = body.into_inner();
    let event = NewEvent::new("signed_up", &email).attribute("plan", plan.as_str());
    if let Err(error) = mailroom.client.record_event(mailroom.account, &event).await {
        return failure(&error);
    }
    let welcome = SendMessage::new("welcome", &email).data("plan", plan);
    // The key makes the welcome mail once per address, however often this runs.
    let key = format!("welcome-{}", email.to_lowercase());
    match mailroom
        .client
        .send_message(mailroom.account, &welcome, Some(&key))
        .await
    {
        Ok(message) => HttpResponse::Ok().json(json!({ "messageId": message.id.to_string() })),
        Err(error) => failure(&error),
    }
}

/// The caller's mistakes (a malformed address) go back to them with the field; anything
/// else is this service's problem.
fn failure(error: &Error) -> HttpResponse {
    match error.problem() {
        Some(problem) if problem.status == 400 => HttpResponse::BadRequest().json(json!({
            "detail": problem.detail,
            "fields": problem.errors.iter().map(|e| &e.field).collect::<Vec<_>>(),
        })),
        _ => {
            eprintln!("mailroom: {error}");
            HttpResponse::BadGateway().finish()
        }
    }
}

async fn webhook(
    mailroom: web::Data<Mailroom>,
    request: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    let headers = match WebhookHeaders::from_lookup(|name| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
    }) {
        Ok(headers) => headers,
        Err(error) => return HttpResponse::BadRequest().body(error.to_string()),
    };
    match verify_delivery(headers, &body, &mailroom.webhook_secret) {
        Ok(delivery) => {
            // `webhook-id` is the same on every retry of an event: use it to drop repeats.
            println!("{} {}: {}", headers.id, delivery.kind, delivery.data);
            HttpResponse::Ok().finish()
        }
        Err(error) => HttpResponse::BadRequest().body(error.to_string()),
    }
}

fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/signup", web::post().to(signup))
        .route("/webhooks/mailroom", web::post().to(webhook));
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let client = Client::builder(env("MAILROOM_URL"))
        .token(env("MAILROOM_TOKEN"))
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(std::io::Error::other)?;
    let mailroom = web::Data::new(Mailroom {
        client,
        account: env("MAILROOM_ACCOUNT")
            .parse()
            .map_err(std::io::Error::other)?,
        webhook_secret: env("MAILROOM_WEBHOOK_SECRET"),
    });
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:8081".into());
    println!("listening on {listen}");
    HttpServer::new(move || App::new().app_data(mailroom.clone()).configure(routes))
        .bind(listen)?
        .run()
        .await
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use actix_web::test;
    use mailroom_client::webhooks::{sign, SigningSecret};

    use super::*;

    #[actix_web::test]
    async fn the_webhook_route_takes_signed_deliveries_only() {
        let secret = SigningSecret::from_random([9; 32]);
        let mailroom = web::Data::new(Mailroom {
            client: Client::new("http://127.0.0.1:9", "mailroom_pat_unused").expect("client"),
            account: "0193b1c4-0000-7000-8000-000000000001".parse().expect("id"),
            webhook_secret: secret.secret().expose().to_owned(),
        });
        let app = test::init_service(App::new().app_data(mailroom.clone()).configure(routes)).await;
        let body = r#"{"type":"contact.bounced","data":{"email":"grace@example.com"},"timestamp":"2026-11-24T10:00:00.000Z"}"#;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_secs() as i64;
        let signed = |body: &'static str| {
            test::TestRequest::post()
                .uri("/webhooks/mailroom")
                .insert_header(("webhook-id", "evt-1"))
                .insert_header(("webhook-timestamp", now.to_string()))
                .insert_header((
                    "webhook-signature",
                    sign(&secret, "evt-1", now, body.as_bytes()),
                ))
        };
        let accepted = test::call_service(&app, signed(body).set_payload(body).to_request()).await;
        assert_eq!(accepted.status(), 200);
        let tampered = test::call_service(
            &app,
            signed(body)
                .set_payload(body.replace("grace", "eve"))
                .to_request(),
        )
        .await;
        assert_eq!(tampered.status(), 400);
        let unsigned = test::TestRequest::post()
            .uri("/webhooks/mailroom")
            .set_payload(body)
            .to_request();
        assert_eq!(test::call_service(&app, unsigned).await.status(), 400);
    }
}
