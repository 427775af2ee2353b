//! `docs/api.md` is the API reference a clone of the repository carries. Its route
//! reference (everything after [`MARKER`]) is generated from the served
//! `/v2/openapi.json`: this test fails when the file and the document disagree (a route,
//! a parameter, a field, a status code), and rewrites the file when run with
//! `MAILROOM_WRITE_API_DOC=1`:
//!
//! ```sh
//! MAILROOM_WRITE_API_DOC=1 cargo nextest run -p mailroom-tests -E 'test(api_doc)'
//! ```
//!
//! The hand-written part above the marker (conventions, errors, paging) is left alone.

use std::{collections::BTreeSet, fmt::Write as _, path::PathBuf};

use mailroom_tests::{expect_json, spawn_app};
use reqwest::Method;
use serde_json::Value;

/// The line after which `docs/api.md` is generated.
const MARKER: &str =
    "<!-- Generated from /v2/openapi.json by tests/api/api_doc.rs: edit the code, not below. -->";
const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];
/// Sections in reading order; tags not listed here follow in alphabetical order.
const TAG_ORDER: [(&str, &str); 15] = [
    ("tokens", "Tokens"),
    ("accounts", "Accounts and webhook configuration"),
    ("templates", "Templates"),
    ("mail-servers", "Mail servers"),
    ("domains", "Sending domains"),
    ("contacts", "Contacts"),
    ("events", "Events"),
    ("topics", "Topics"),
    ("segments", "Saved segments"),
    ("messages", "Messages"),
    ("automations", "Automations"),
    ("announcements", "Announcements"),
    ("webhook-events", "Webhook events"),
    ("links", "Tracking and unsubscribe links (public)"),
    ("operations", "Operations (public)"),
];

fn api_md_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/api.md")
}

/// `#/components/schemas/TemplateDto` → `TemplateDto`.
fn ref_name(reference: &str) -> &str {
    reference.rsplit('/').next().unwrap_or(reference)
}

/// A schema's type in words, with links to named shapes.
fn type_of(schema: &Value) -> String {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = ref_name(reference);
        return format!("[`{name}`](#{})", name.to_lowercase());
    }
    for combinator in ["oneOf", "anyOf", "allOf"] {
        if let Some(options) = schema[combinator].as_array() {
            let words: Vec<String> = options.iter().map(type_of).collect();
            return words.join(if combinator == "allOf" {
                " and "
            } else {
                " or "
            });
        }
    }
    let types: Vec<String> = match &schema["type"] {
        Value::String(name) => vec![name.clone()],
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    let types: Vec<String> = types
        .into_iter()
        .map(|name| match name.as_str() {
            "array" => format!("array of {}", type_of(&schema["items"])),
            _ => match schema["format"].as_str() {
                Some(format) => format!("{name} ({format})"),
                None => name,
            },
        })
        .collect();
    if types.is_empty() {
        "any".to_owned()
    } else {
        types.join(" or ")
    }
}

/// One line of table text: no line breaks, no unescaped bars.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn media_types(content: &Value) -> Vec<(String, &Value)> {
    content
        .as_object()
        .map(|media| {
            media
                .iter()
                .map(|(name, value)| (name.clone(), value))
                .collect()
        })
        .unwrap_or_default()
}

/// The route reference: one section per operation, grouped by tag, then every shape.
fn generate(document: &Value) -> String {
    let mut operations: Vec<(String, String, String, &Value)> = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in METHODS {
            if let Some(operation) = item.get(method) {
                let tag = operation["tags"][0].as_str().unwrap_or("other").to_owned();
                operations.push((tag, path.clone(), method.to_uppercase(), operation));
            }
        }
    }
    let mut tags: Vec<String> = operations.iter().map(|(tag, ..)| tag.clone()).collect();
    tags.sort_by_key(|tag| {
        let rank = TAG_ORDER.iter().position(|(known, _)| known == tag);
        (rank.unwrap_or(TAG_ORDER.len()), tag.clone())
    });
    tags.dedup();

    let mut out = String::new();
    for tag in &tags {
        let title = TAG_ORDER
            .iter()
            .find(|(known, _)| known == tag)
            .map_or(tag.as_str(), |(_, title)| title);
        let _ = writeln!(out, "\n## {title}\n");
        for (_, path, method, operation) in operations.iter().filter(|(t, ..)| t == tag) {
            let _ = writeln!(out, "### `{method} {path}`\n");
            let summary = operation["summary"].as_str().unwrap_or("");
            let description = operation["description"].as_str().unwrap_or("");
            for text in [summary, description] {
                if !text.is_empty() {
                    let _ = writeln!(out, "{}\n", cell(text));
                }
            }
            let secured = operation["security"]
                .as_array()
                .is_some_and(|schemes| schemes.iter().any(|scheme| scheme.get("bearer").is_some()));
            let _ = writeln!(
                out,
                "{}\n",
                if secured {
                    "Needs a token: `Authorization: Bearer mailroom_pat_…`."
                } else {
                    "No token."
                }
            );
            if let Some(parameters) = operation["parameters"].as_array().filter(|p| !p.is_empty()) {
                let _ = writeln!(out, "| parameter | in | required | type | meaning |");
                let _ = writeln!(out, "|---|---|---|---|---|");
                for parameter in parameters {
                    let _ = writeln!(
                        out,
                        "| `{}` | {} | {} | {} | {} |",
                        parameter["name"].as_str().unwrap_or("?"),
                        parameter["in"].as_str().unwrap_or("?"),
                        if parameter["required"].as_bool() == Some(true) {
                            "yes"
                        } else {
                            "no"
                        },
                        type_of(&parameter["schema"]),
                        cell(parameter["description"].as_str().unwrap_or(""))
                    );
                }
                out.push('\n');
            }
            let body = &operation["requestBody"];
            for (media, content) in media_types(&body["content"]) {
                let _ = writeln!(
                    out,
                    "Body{} (`{media}`): {}.\n",
                    if body["required"].as_bool() == Some(true) {
                        ""
                    } else {
                        ", optional"
                    },
                    type_of(&content["schema"])
                );
            }
            let mut answers = Vec::new();
            for (status, response) in operation["responses"].as_object().expect("responses") {
                let mut shapes: Vec<String> = media_types(&response["content"])
                    .into_iter()
                    .map(|(media, content)| {
                        if content["schema"].is_null() {
                            format!("`{media}`")
                        } else {
                            format!("{} as `{media}`", type_of(&content["schema"]))
                        }
                    })
                    .collect();
                if let Some(text) = response["description"].as_str().filter(|t| !t.is_empty()) {
                    shapes.push(cell(text));
                }
                answers.push(if shapes.is_empty() {
                    format!("`{status}`")
                } else {
                    format!("`{status}` {}", shapes.join("; "))
                });
            }
            let _ = writeln!(out, "Answers: {}.\n", answers.join(", "));
        }
    }

    let _ = writeln!(out, "\n## Shapes\n");
    let _ = writeln!(
        out,
        "Bodies and answers by name, as the document defines them. A field in **bold** is \
         required; `null` among the types means the field may be sent as `null`.\n"
    );
    for (name, schema) in document["components"]["schemas"]
        .as_object()
        .expect("component schemas")
    {
        let _ = writeln!(out, "### {name}\n");
        if let Some(description) = schema["description"].as_str() {
            let _ = writeln!(out, "{}\n", cell(description));
        }
        let required: BTreeSet<&str> = schema["required"]
            .as_array()
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match schema["properties"].as_object() {
            Some(properties) if !properties.is_empty() => {
                let _ = writeln!(out, "| field | type | meaning |");
                let _ = writeln!(out, "|---|---|---|");
                for (field, property) in properties {
                    let field = if required.contains(field.as_str()) {
                        format!("**`{field}`**")
                    } else {
                        format!("`{field}`")
                    };
                    let _ = writeln!(
                        out,
                        "| {field} | {} | {} |",
                        type_of(property),
                        cell(property["description"].as_str().unwrap_or(""))
                    );
                }
                out.push('\n');
            }
            _ => {
                let _ = writeln!(out, "{}.\n", type_of(schema));
            }
        }
    }
    out
}

/// `METHOD /path` of every `### \`METHOD /path\`` heading.
fn documented_routes(markdown: &str) -> BTreeSet<String> {
    markdown
        .lines()
        .filter_map(|line| line.strip_prefix("### `")?.strip_suffix('`'))
        .filter(|route| METHODS.iter().any(|m| route.starts_with(&m.to_uppercase())))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn api_doc_matches_the_served_openapi_document() {
    let app = spawn_app().await;
    let response = app
        .request(Method::GET, "/v2/openapi.json", None)
        .send()
        .await
        .expect("GET /v2/openapi.json");
    let document = expect_json(response, 200).await;
    let generated = generate(&document);

    let path = api_md_path();
    let current = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let (preamble, reference) = current
        .split_once(MARKER)
        .unwrap_or_else(|| panic!("{} has no generation marker line", path.display()));
    if std::env::var_os("MAILROOM_WRITE_API_DOC").is_some() {
        std::fs::write(&path, format!("{preamble}{MARKER}\n{generated}"))
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }

    // Routes first, in both directions, for a readable failure.
    let served: BTreeSet<String> = documented_routes(&generated);
    let written = documented_routes(reference);
    let missing: Vec<&String> = served.difference(&written).collect();
    let stale: Vec<&String> = written.difference(&served).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/api.md is out of date: routes served but not documented {missing:?}, \
         documented but not served {stale:?}; regenerate it with \
         MAILROOM_WRITE_API_DOC=1 cargo nextest run -p mailroom-tests -E 'test(api_doc)'"
    );
    assert!(
        served.len() >= 60,
        "the document lists only {} routes",
        served.len()
    );
    assert!(
        reference.trim_start() == generated.trim_start(),
        "docs/api.md's route reference differs from /v2/openapi.json (a parameter, field, \
         description or status code); regenerate it with \
         MAILROOM_WRITE_API_DOC=1 cargo nextest run -p mailroom-tests -E 'test(api_doc)'"
    );
}
