use mailroom_tests::{expect_json, spawn_app};

/// Every route of the API, as docs/api.md and the specification name them for this stage.
pub const ROUTES: [(&str, &str); 116] = [
    ("post", "/v2/users/me/tokens"),
    ("get", "/v2/users/me/tokens"),
    ("delete", "/v2/users/me/tokens/{tokenId}"),
    ("post", "/v2/accounts"),
    ("get", "/v2/accounts"),
    ("get", "/v2/accounts/{accountId}"),
    ("patch", "/v2/accounts/{accountId}"),
    ("get", "/v2/accounts/{accountId}/members"),
    ("post", "/v2/accounts/{accountId}/members"),
    ("patch", "/v2/accounts/{accountId}/members/{userId}"),
    ("delete", "/v2/accounts/{accountId}/members/{userId}"),
    ("put", "/v2/accounts/{accountId}/webhooks"),
    ("get", "/v2/accounts/{accountId}/webhook-events"),
    ("get", "/v2/accounts/{accountId}/webhook-events/count"),
    ("get", "/v2/accounts/{accountId}/webhook-events/{eventId}"),
    (
        "post",
        "/v2/accounts/{accountId}/webhook-events/{eventId}/retry",
    ),
    ("get", "/v2/accounts/{accountId}/templates"),
    ("get", "/v2/accounts/{accountId}/templates/count"),
    ("get", "/v2/accounts/{accountId}/templates/{templateId}"),
    ("post", "/v2/accounts/{accountId}/templates"),
    ("patch", "/v2/accounts/{accountId}/templates/{templateId}"),
    ("delete", "/v2/accounts/{accountId}/templates/{templateId}"),
    (
        "post",
        "/v2/accounts/{accountId}/templates/{templateId}/preview",
    ),
    (
        "post",
        "/v2/accounts/{accountId}/templates/{templateId}/test-send",
    ),
    ("get", "/v2/accounts/{accountId}/mail-servers"),
    ("get", "/v2/accounts/{accountId}/mail-servers/count"),
    (
        "get",
        "/v2/accounts/{accountId}/mail-servers/{mailServerId}",
    ),
    ("post", "/v2/accounts/{accountId}/mail-servers"),
    (
        "patch",
        "/v2/accounts/{accountId}/mail-servers/{mailServerId}",
    ),
    (
        "delete",
        "/v2/accounts/{accountId}/mail-servers/{mailServerId}",
    ),
    ("get", "/v2/accounts/{accountId}/domains"),
    ("get", "/v2/accounts/{accountId}/domains/count"),
    ("get", "/v2/accounts/{accountId}/domains/{domainId}"),
    ("post", "/v2/accounts/{accountId}/domains"),
    ("post", "/v2/accounts/{accountId}/domains/{domainId}/verify"),
    ("post", "/v2/accounts/{accountId}/domains/{domainId}/rotate"),
    (
        "delete",
        "/v2/accounts/{accountId}/domains/{domainId}/selectors/{selector}",
    ),
    ("delete", "/v2/accounts/{accountId}/domains/{domainId}"),
    ("get", "/v2/accounts/{accountId}/automations"),
    ("get", "/v2/accounts/{accountId}/automations/count"),
    ("get", "/v2/accounts/{accountId}/automations/{automationId}"),
    ("post", "/v2/accounts/{accountId}/automations"),
    (
        "patch",
        "/v2/accounts/{accountId}/automations/{automationId}",
    ),
    (
        "delete",
        "/v2/accounts/{accountId}/automations/{automationId}",
    ),
    ("get", "/v2/accounts/{accountId}/announcements"),
    ("get", "/v2/accounts/{accountId}/announcements/count"),
    (
        "get",
        "/v2/accounts/{accountId}/announcements/{announcementId}",
    ),
    ("post", "/v2/accounts/{accountId}/announcements"),
    (
        "post",
        "/v2/accounts/{accountId}/announcements/{announcementId}/pause",
    ),
    (
        "post",
        "/v2/accounts/{accountId}/announcements/{announcementId}/resume",
    ),
    (
        "post",
        "/v2/accounts/{accountId}/announcements/{announcementId}/cancel",
    ),
    ("get", "/v2/accounts/{accountId}/topics"),
    ("get", "/v2/accounts/{accountId}/topics/count"),
    ("get", "/v2/accounts/{accountId}/topics/{topicId}"),
    ("post", "/v2/accounts/{accountId}/topics"),
    ("patch", "/v2/accounts/{accountId}/topics/{topicId}"),
    ("delete", "/v2/accounts/{accountId}/topics/{topicId}"),
    ("get", "/v2/accounts/{accountId}/forms"),
    ("get", "/v2/accounts/{accountId}/forms/count"),
    ("get", "/v2/accounts/{accountId}/forms/{formId}"),
    ("post", "/v2/accounts/{accountId}/forms"),
    ("patch", "/v2/accounts/{accountId}/forms/{formId}"),
    ("delete", "/v2/accounts/{accountId}/forms/{formId}"),
    ("get", "/v2/accounts/{accountId}/segments"),
    ("get", "/v2/accounts/{accountId}/segments/count"),
    ("get", "/v2/accounts/{accountId}/segments/{segmentId}"),
    ("get", "/v2/accounts/{accountId}/segments/{segmentId}/count"),
    ("post", "/v2/accounts/{accountId}/segments"),
    ("patch", "/v2/accounts/{accountId}/segments/{segmentId}"),
    ("delete", "/v2/accounts/{accountId}/segments/{segmentId}"),
    ("get", "/v2/accounts/{accountId}/contacts"),
    ("get", "/v2/accounts/{accountId}/contacts/count"),
    ("post", "/v2/accounts/{accountId}/contacts"),
    ("post", "/v2/accounts/{accountId}/contacts/search"),
    ("post", "/v2/accounts/{accountId}/contacts/search/count"),
    ("post", "/v2/accounts/{accountId}/contacts/import"),
    ("get", "/v2/accounts/{accountId}/contacts/{contactId}"),
    ("patch", "/v2/accounts/{accountId}/contacts/{contactId}"),
    ("delete", "/v2/accounts/{accountId}/contacts/{contactId}"),
    (
        "get",
        "/v2/accounts/{accountId}/contacts/{contactId}/events",
    ),
    (
        "get",
        "/v2/accounts/{accountId}/contacts/{contactId}/export",
    ),
    ("post", "/v2/accounts/{accountId}/events"),
    ("get", "/v2/accounts/{accountId}/events/names"),
    ("get", "/v2/accounts/{accountId}/attributes"),
    ("get", "/v2/accounts/{accountId}/attributes/count"),
    ("get", "/v2/accounts/{accountId}/suppressions"),
    ("get", "/v2/accounts/{accountId}/suppressions/count"),
    ("post", "/v2/accounts/{accountId}/suppressions"),
    ("delete", "/v2/accounts/{accountId}/suppressions"),
    ("post", "/v2/accounts/{accountId}/suppressions/import"),
    ("get", "/v2/accounts/{accountId}/suppressions/export"),
    ("get", "/v2/openapi.json"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("post", "/v2/accounts/{accountId}/messages/cancel"),
    (
        "post",
        "/v2/accounts/{accountId}/messages/{messageId}/cancel",
    ),
    ("post", "/v2/accounts/{accountId}/messages"),
    ("get", "/v2/accounts/{accountId}/messages"),
    ("get", "/v2/accounts/{accountId}/messages/count"),
    ("get", "/v2/accounts/{accountId}/messages/stats"),
    ("get", "/v2/accounts/{accountId}/messages/{messageId}"),
    ("post", "/v2/accounts/{accountId}/feedback"),
    ("get", "/v2/accounts/{accountId}/feedback-sources"),
    ("post", "/v2/accounts/{accountId}/feedback-sources"),
    (
        "get",
        "/v2/accounts/{accountId}/feedback-sources/{sourceId}",
    ),
    (
        "delete",
        "/v2/accounts/{accountId}/feedback-sources/{sourceId}",
    ),
    // Provider events: the provider's signature or secret is the credential.
    ("post", "/v2/feedback-sources/{accountId}/{sourceId}/events"),
    // Public link endpoints (no auth; the signed token is the credential).
    ("get", "/t/o/{token}"),
    ("get", "/t/c/{token}"),
    ("get", "/u/{token}"),
    ("post", "/u/{token}"),
    // Subscribe forms' public pages (no auth; the form is public, the confirmation
    // token signed).
    ("get", "/f/{formKey}"),
    ("post", "/f/{formKey}"),
    ("get", "/f/{formKey}/confirm/{token}"),
    ("post", "/f/{formKey}/confirm/{token}"),
];

#[tokio::test]
async fn the_document_is_openapi_3_1_and_lists_every_route() {
    let app = spawn_app().await;
    let response = app
        .client
        .get(format!("{}/v2/openapi.json", app.address))
        .send()
        .await
        .expect("sent");
    let document = expect_json(response, 200).await;
    assert!(
        document["openapi"]
            .as_str()
            .expect("version")
            .starts_with("3.1"),
        "{}",
        document["openapi"]
    );
    let paths = document["paths"].as_object().expect("paths");
    for (method, path) in ROUTES {
        assert!(
            paths.get(path).and_then(|item| item.get(method)).is_some(),
            "{method} {path} missing from the document"
        );
    }
    let documented: usize = paths
        .values()
        .map(|item| {
            item.as_object().map_or(0, |o| {
                o.keys()
                    .filter(|k| ["get", "post", "put", "patch", "delete"].contains(&k.as_str()))
                    .count()
            })
        })
        .sum();
    assert_eq!(
        documented,
        ROUTES.len(),
        "the document lists exactly the served routes"
    );
    assert!(document["components"]["securitySchemes"]["bearer"].is_object());
    assert!(document["components"]["schemas"]["Problem"].is_object());
}

#[tokio::test]
async fn every_documented_route_is_served() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    for (method, path) in ROUTES {
        let concrete = path
            .replace("{accountId}", &account)
            .replace("{tokenId}", "01936c5e-7b2a-7cde-8f00-0123456789ab")
            .replace("{templateId}", "01936c5e-7b2a-7cde-8f00-0123456789ab")
            .replace("{mailServerId}", "01936c5e-7b2a-7cde-8f00-0123456789ab")
            .replace("{topicId}", "01936c5e-7b2a-7cde-8f00-0123456789ab")
            .replace("{segmentId}", "01936c5e-7b2a-7cde-8f00-0123456789ab")
            .replace("{contactId}", "01936c5e-7b2a-7cde-8f00-0123456789ab");
        let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
        let response = app
            .request(method.clone(), &concrete, Some(&token))
            .send()
            .await
            .expect("sent");
        let status = response.status().as_u16();
        assert!(
            status != 405 && status < 500,
            "{method} {concrete} answered {status}"
        );
        if status == 404 {
            let body = response.text().await.unwrap_or_default();
            assert!(
                body.contains("no such resource"),
                "{method} {concrete}: route exists, record does not: {body}"
            );
        }
    }
}
