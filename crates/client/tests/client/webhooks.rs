//! A real signed delivery, from the server's webhook worker to a loopback receiver,
//! verified with the client's re-export of the domain's check.

use mailroom_client::webhooks::{verify_delivery, WebhookError, WebhookHeaders};
use mailroom_client::{ContactUpsert, TryStreamExt, WebhookEventFilter, WebhookSettings};
use mailroom_server::webhook_worker::WebhookWorker;
use mailroom_test_support::TestWebhookReceiver;

use crate::support::Setup;

#[tokio::test]
async fn a_real_delivery_verifies_and_a_tampered_one_does_not() {
    let setup = Setup::new(|_| {}).await;
    let client = &setup.client;
    let account = setup.account().await;
    let receiver = TestWebhookReceiver::start();
    let webhooks = client
        .set_webhooks(
            account,
            &WebhookSettings {
                url: receiver.url("/hooks"),
                auth_type: "none".into(),
                events: vec!["contact.deleted".into()],
                ..WebhookSettings::default()
            },
        )
        .await
        .expect("webhooks set");
    let secret = webhooks.signing_secret.expose().to_owned();
    assert!(secret.starts_with("whsec_"), "the whole secret, this once");

    let contact = client
        .upsert_contact(
            account,
            &ContactUpsert {
                email: "grace@example.com".into(),
                attributes: None,
            },
        )
        .await
        .expect("contact");
    client
        .delete_contact(account, contact.id)
        .await
        .expect("deleted");

    let queued: Vec<_> = client
        .stream_webhook_events(account, WebhookEventFilter::default())
        .try_collect()
        .await
        .expect("events");
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].status, "queued");
    let round = WebhookWorker::new(setup.app.services.clone(), &setup.app.config)
        .run_once()
        .await
        .expect("worker round");
    assert_eq!(round.delivered, 1, "{round:?}");

    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    let headers = WebhookHeaders::from_lookup(|name| request.header(name)).expect("headers");
    assert_eq!(headers.id, queued[0].id.to_string());
    let delivery = verify_delivery(headers, &request.body, &secret).expect("verified");
    assert_eq!(delivery.kind, "contact.deleted");
    assert_eq!(delivery.data["contactId"], contact.id.to_string());

    // A changed body, a wrong secret, a missing header: refused.
    let mut tampered = request.body.clone();
    tampered.extend_from_slice(b" ");
    assert!(matches!(
        verify_delivery(headers, &tampered, &secret),
        Err(WebhookError::Signature(_))
    ));
    let other_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    assert!(matches!(
        verify_delivery(headers, &request.body, other_secret),
        Err(WebhookError::Signature(_))
    ));
    assert_eq!(
        WebhookHeaders::from_lookup(|name| (name != "webhook-signature")
            .then(|| request.header(name))
            .flatten()),
        Err(WebhookError::MissingHeader("webhook-signature"))
    );

    let delivered = client
        .get_webhook_event(account, queued[0].id)
        .await
        .expect("event");
    assert_eq!(delivered.status, "delivered");
    assert_eq!(delivered.last_status_code, Some(200));
    let delivered_filter = WebhookEventFilter {
        status: Some("delivered".into()),
        event: Some("contact.deleted".into()),
    };
    assert_eq!(
        client
            .count_webhook_events(account, &delivered_filter)
            .await
            .expect("count"),
        1
    );
    let again = client
        .retry_webhook_event(account, delivered.id)
        .await
        .expect("a manual retry");
    assert_eq!(again.status, "queued");
    assert_eq!(again.parent_event_id, Some(delivered.id));
    assert!(again.retried_by_user_id.is_some());
    let masked = client.get_account(account).await.expect("account");
    let masked = masked.webhooks.expect("configured");
    assert_ne!(masked.signing_secret.expose(), secret, "masked on reads");
}
