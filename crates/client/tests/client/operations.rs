//! The client's table of operations against the document the real server serves: an
//! operation the server documents and the client lacks fails here, and so does one the
//! client names that the document does not have (or has under another method or path).

use std::collections::BTreeMap;

use mailroom_client::{Client, Replay, OPERATIONS};
use mailroom_tests::spawn_app;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

#[tokio::test]
async fn the_client_has_every_operation_of_the_openapi_document_and_no_other() {
    let app = spawn_app().await;
    // The document is public: no token needed.
    let client = Client::builder(&app.address).build().expect("client");
    let document = client.openapi_json().await.expect("the OpenAPI document");

    let mut documented = BTreeMap::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in METHODS {
            if let Some(operation) = item.get(method) {
                let id = operation["operationId"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
                documented.insert(id.to_owned(), (method.to_uppercase(), path.clone()));
            }
        }
    }
    let named: BTreeMap<String, (String, String)> = OPERATIONS
        .iter()
        .map(|op| (op.id.to_owned(), (op.method.to_owned(), op.path.to_owned())))
        .collect();
    assert_eq!(
        named.len(),
        OPERATIONS.len(),
        "an operation id is listed twice"
    );

    let missing: Vec<_> = documented
        .keys()
        .filter(|id| !named.contains_key(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "the OpenAPI document has operations the client lacks: {missing:?}"
    );
    let unknown: Vec<_> = named
        .keys()
        .filter(|id| !documented.contains_key(*id))
        .collect();
    assert!(
        unknown.is_empty(),
        "the client names operations the document lacks: {unknown:?}"
    );
    for (id, route) in &named {
        assert_eq!(
            Some(route),
            documented.get(id),
            "{id}: the client's method and path differ from the document's"
        );
    }
}

#[test]
fn only_methods_safe_to_repeat_are_retried_without_a_key() {
    for op in OPERATIONS {
        match op.method {
            "GET" | "PUT" | "DELETE" => assert_eq!(op.replay, Replay::Always, "{}", op.id),
            "PATCH" => assert_eq!(op.replay, Replay::WithIdempotencyKey, "{}", op.id),
            // POSTs repeat only when read-only: the two searches and template previews.
            "POST" => assert_eq!(
                op.replay == Replay::Always,
                op.path.contains("/contacts/search") || op.path.ends_with("/preview"),
                "{}",
                op.id
            ),
            other => panic!("{}: unexpected method {other}", op.id),
        }
    }
}
