//! The client is what a product links: it must not pull in the server's framework or its
//! adapters. `cargo tree` lists the client's normal (non-dev) dependency graph.

use std::process::Command;

/// Crates of the server side that a client build must never contain.
const FORBIDDEN: [&str; 8] = [
    "actix-web",
    "actix-http",
    "mailroom-http",
    "mailroom-app",
    "mailroom-postgres",
    "mailroom-server",
    "diesel",
    "utoipa",
];

#[test]
fn the_client_depends_on_no_server_crate() {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "mailroom-client",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p}", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(tree.contains("mailroom-domain v"), "{tree}");
    assert!(tree.contains("reqwest v"), "{tree}");
    let found: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split(' ').next())
        .filter(|name| FORBIDDEN.contains(name))
        .collect();
    assert!(found.is_empty(), "the client pulls in {found:?}");
}
