//! Key rotation with the real binary: secrets sealed under key A open under (current B,
//! previous A); `mailroom rotate-secrets` re-seals them so B alone opens them; a second
//! run changes nothing; a run with neither key fails and names what it could not open.

use std::{
    path::PathBuf,
    process::{Command, Output, Stdio},
    sync::Arc,
};

use base64::Engine as _;
use diesel::{prelude::*, sql_query, sql_types};
use mailroom_app::ports::{SealedSecret, SecretSlot, Secrets};
use mailroom_domain::secret::SecretString;
use mailroom_postgres::schema::{
    feedback_sources, mail_servers, sending_domain_keys, suppression_keys, webhook_configs,
};
use mailroom_server::{
    application::build_services, system::SealingSecrets, system::SystemClock, Config,
};
use mailroom_test_support::TestDatabase;
use serde_json::Value;
use uuid::Uuid;

const MAILROOM: &str = env!("CARGO_BIN_EXE_mailroom");
const KEY_A: [u8; 32] = [0xA; 32];
const KEY_B: [u8; 32] = [0xB; 32];
const KEY_C: [u8; 32] = [0xC; 32];

/// A stored secret: where it is, and what it must open to.
struct Stored {
    slot: SecretSlot,
    plaintext: String,
}

fn mail_server_slot(account: Uuid, server: Uuid) -> SecretSlot {
    SecretSlot {
        table: "mail_servers",
        column: "password",
        row: format!("{account}/{server}"),
    }
}

fn dkim_key_slot(account: Uuid, key: Uuid) -> SecretSlot {
    SecretSlot {
        table: "sending_domain_keys",
        column: "private_key",
        row: format!("{account}/{key}"),
    }
}

fn feedback_source_slot(account: Uuid, source: Uuid) -> SecretSlot {
    SecretSlot {
        table: "feedback_sources",
        column: "signing_key",
        row: format!("{account}/{source}"),
    }
}

fn suppression_key_slot(account: Uuid) -> SecretSlot {
    SecretSlot {
        table: "suppression_keys",
        column: "sealed_key",
        row: account.to_string(),
    }
}

fn webhook_slot(account: Uuid, column: &'static str) -> SecretSlot {
    SecretSlot {
        table: "webhook_configs",
        column,
        row: account.to_string(),
    }
}

/// Two accounts, three mail servers, two webhook configurations (one with a receiver
/// credential), one DKIM key of a sending domain, one Mailgun feedback source, one
/// suppression-list key, every secret sealed under key A.
fn seed(conn: &mut PgConnection) -> Vec<Stored> {
    let a = SealingSecrets::new(&KEY_A);
    let mut stored = Vec::new();
    let mut seal = |slot: SecretSlot, plaintext: String| {
        let sealed = a.seal(&SecretString::new(plaintext.clone()), &slot);
        stored.push(Stored { slot, plaintext });
        sealed.0
    };
    for (n, with_credential) in [(1, true), (2, false)] {
        let account = Uuid::now_v7();
        sql_query("INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, now())")
            .bind::<sql_types::Uuid, _>(account)
            .bind::<sql_types::Text, _>(format!("account {n}"))
            .execute(conn)
            .expect("account");
        for server in 0..n {
            let id = Uuid::now_v7();
            let password = seal(mail_server_slot(account, id), format!("smtp-{n}-{server}"));
            sql_query(
                "INSERT INTO mail_servers (account_id, id, service_type, host, port, secure, \
                 require_tls, username, password, default_from_email, default_from_name, \
                 created_at, updated_at) \
                 VALUES ($1, $2, 'smtp', 'mail.example.com', 587, false, true, 'user', $3, \
                 'a@example.com', 'A', now(), now())",
            )
            .bind::<sql_types::Uuid, _>(account)
            .bind::<sql_types::Uuid, _>(id)
            .bind::<sql_types::Bytea, _>(password)
            .execute(conn)
            .expect("mail server");
        }
        let signing = seal(
            webhook_slot(account, "signing_secret"),
            format!("whsec_{n}"),
        );
        let credential = with_credential
            .then(|| seal(webhook_slot(account, "password_or_token"), "hunter2".into()));
        sql_query(
            "INSERT INTO webhook_configs (account_id, url, auth_type, events, username, \
             password_or_token, signing_secret, updated_at) \
             VALUES ($1, 'https://hooks.example.com/x', $2, ARRAY['contact.deleted'], $3, $4, $5, now())",
        )
        .bind::<sql_types::Uuid, _>(account)
        .bind::<sql_types::Text, _>(if with_credential { "basic" } else { "none" })
        .bind::<sql_types::Nullable<sql_types::Text>, _>(with_credential.then_some("user"))
        .bind::<sql_types::Nullable<sql_types::Bytea>, _>(credential)
        .bind::<sql_types::Bytea, _>(signing)
        .execute(conn)
        .expect("webhook config");
        if n == 1 {
            let domain = Uuid::now_v7();
            let key = Uuid::now_v7();
            let private_key = seal(
                dkim_key_slot(account, key),
                "-----BEGIN RSA PRIVATE KEY-----\n…".into(),
            );
            sql_query(
                "INSERT INTO sending_domains (account_id, id, name, status, spf_status, \
                 dmarc_status, return_path_status, created_at) \
                 VALUES ($1, $2, 'acme.example', 'verified', 'pending', 'pending', 'pending', now())",
            )
            .bind::<sql_types::Uuid, _>(account)
            .bind::<sql_types::Uuid, _>(domain)
            .execute(conn)
            .expect("sending domain");
            sql_query(
                "INSERT INTO sending_domain_keys (account_id, id, domain_id, selector, \
                 private_key, public_key, status, created_at) \
                 VALUES ($1, $2, $3, 'mr20261124abcd', $4, 'MIIB', 'verified', now())",
            )
            .bind::<sql_types::Uuid, _>(account)
            .bind::<sql_types::Uuid, _>(key)
            .bind::<sql_types::Uuid, _>(domain)
            .bind::<sql_types::Bytea, _>(private_key)
            .execute(conn)
            .expect("DKIM key");
            // A Mailgun feedback source (its signing key sealed) and an SES one (none).
            let source = Uuid::now_v7();
            let signing_key = seal(
                feedback_source_slot(account, source),
                "key-mailgun-1".into(),
            );
            sql_query(
                "INSERT INTO feedback_sources (account_id, id, provider, signing_key, created_at) \
                 VALUES ($1, $2, 'mailgun', $3, now())",
            )
            .bind::<sql_types::Uuid, _>(account)
            .bind::<sql_types::Uuid, _>(source)
            .bind::<sql_types::Bytea, _>(signing_key)
            .execute(conn)
            .expect("Mailgun feedback source");
            sql_query(
                "INSERT INTO feedback_sources (account_id, id, provider, topic_arns, created_at) \
                 VALUES ($1, $2, 'ses', ARRAY['arn:aws:sns:us-east-1:123456789012:t'], now())",
            )
            .bind::<sql_types::Uuid, _>(account)
            .bind::<sql_types::Uuid, _>(Uuid::now_v7())
            .execute(conn)
            .expect("SES feedback source");
            let address_key = seal(suppression_key_slot(account), "ab".repeat(32));
            sql_query(
                "INSERT INTO suppression_keys (account_id, sealed_key, created_at) \
                 VALUES ($1, $2, now())",
            )
            .bind::<sql_types::Uuid, _>(account)
            .bind::<sql_types::Bytea, _>(address_key)
            .execute(conn)
            .expect("suppression key");
        }
    }
    stored
}

/// The stored bytes of `slot`, read back from the database.
fn stored_bytes(conn: &mut PgConnection, slot: &SecretSlot) -> SealedSecret {
    let bytes = match slot.column {
        "sealed_key" => suppression_keys::table
            .find(Uuid::parse_str(&slot.row).expect("uuid"))
            .select(suppression_keys::sealed_key)
            .first::<Vec<u8>>(conn)
            .expect("suppression key row"),
        "signing_key" => {
            let (account, source) = slot.row.split_once('/').expect("account/source");
            feedback_sources::table
                .find((
                    Uuid::parse_str(account).expect("uuid"),
                    Uuid::parse_str(source).expect("uuid"),
                ))
                .select(feedback_sources::signing_key)
                .first::<Option<Vec<u8>>>(conn)
                .expect("feedback source row")
                .expect("a signing key")
        }
        "private_key" => {
            let (account, key) = slot.row.split_once('/').expect("account/key");
            sending_domain_keys::table
                .find((
                    Uuid::parse_str(account).expect("uuid"),
                    Uuid::parse_str(key).expect("uuid"),
                ))
                .select(sending_domain_keys::private_key)
                .first::<Vec<u8>>(conn)
                .expect("DKIM key row")
        }
        "password" => {
            let (account, server) = slot.row.split_once('/').expect("account/server");
            mail_servers::table
                .find((
                    Uuid::parse_str(account).expect("uuid"),
                    Uuid::parse_str(server).expect("uuid"),
                ))
                .select(mail_servers::password)
                .first::<Vec<u8>>(conn)
                .expect("mail server row")
        }
        "signing_secret" => webhook_configs::table
            .find(Uuid::parse_str(&slot.row).expect("uuid"))
            .select(webhook_configs::signing_secret)
            .first::<Vec<u8>>(conn)
            .expect("webhook row"),
        _ => webhook_configs::table
            .find(Uuid::parse_str(&slot.row).expect("uuid"))
            .select(webhook_configs::password_or_token)
            .first::<Option<Vec<u8>>>(conn)
            .expect("webhook row")
            .expect("a credential"),
    };
    SealedSecret(bytes)
}

/// Asserts that every stored secret opens with `secrets` to its plaintext.
fn assert_all_open(conn: &mut PgConnection, stored: &[Stored], secrets: &dyn Secrets, why: &str) {
    for item in stored {
        let sealed = stored_bytes(conn, &item.slot);
        let opened = secrets
            .open(&sealed, &item.slot)
            .unwrap_or_else(|e| panic!("{why}: {:?} does not open: {}", item.slot, e.0));
        assert_eq!(opened.expose(), item.plaintext, "{why}");
    }
}

fn key(key: &[u8; 32]) -> String {
    base64::engine::general_purpose::STANDARD.encode(key)
}

fn rotate(database: &TestDatabase, current: &[u8; 32], previous: Option<&[u8; 32]>) -> Output {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let mut command = Command::new(MAILROOM);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("MAILROOM_") {
            command.env_remove(name);
        }
    }
    command
        .current_dir(dir)
        .env("DATABASE_URL", database.url())
        .env("MAILROOM_SECRET_KEY", key(current))
        .env("MAILROOM_LOG", "warn")
        .args(["rotate-secrets", "--batch-size", "2"])
        .stdin(Stdio::null());
    if let Some(previous) = previous {
        command.env("MAILROOM_SECRET_KEY_PREVIOUS", key(previous));
    }
    command.output().expect("running mailroom rotate-secrets")
}

fn summary(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(stdout.lines().count(), 1, "one JSON line, got {stdout:?}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

fn column<'v>(summary: &'v Value, name: &str) -> &'v Value {
    summary["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .find(|c| c["column"] == name)
        .unwrap_or_else(|| panic!("{name} missing from {summary}"))
}

#[test]
fn rotate_secrets_reseals_everything_under_the_current_key_once() {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    let stored = seed(&mut conn);
    assert_eq!(stored.len(), 3 + 2 + 1 + 1 + 1 + 1);

    // Before the rotation: B alone cannot read them, B with A as previous can, as wired by
    // the application from the configuration.
    let b_alone = SealingSecrets::new(&KEY_B);
    let first = &stored[0];
    assert!(b_alone
        .open(&stored_bytes(&mut conn, &first.slot), &first.slot)
        .is_err());
    let mut config = Config::new(database.url(), KEY_B);
    config.secret_key_previous = Some(KEY_A);
    config.db_pool_size = 1;
    let (services, _) = build_services(&config, Arc::new(SystemClock)).expect("services");
    assert_all_open(
        &mut conn,
        &stored,
        services.secrets.as_ref(),
        "B with previous A",
    );

    // A run with the wrong keys changes nothing, fails, and names what it could not open.
    let refused = rotate(&database, &KEY_C, None);
    assert!(!refused.status.success(), "neither key: must fail");
    let report = summary(&refused);
    assert_eq!(report["complete"], false);
    assert_eq!(report["resealed"], 0);
    assert_eq!(
        column(&report, "mail_servers.password")["unreadable"]
            .as_array()
            .expect("list")
            .len(),
        3
    );
    assert_all_open(
        &mut conn,
        &stored,
        &SealingSecrets::new(&KEY_A),
        "untouched",
    );

    // The rotation, in batches of two.
    let rotated = rotate(&database, &KEY_B, Some(&KEY_A));
    assert!(
        rotated.status.success(),
        "rotate-secrets failed: {}",
        String::from_utf8_lossy(&rotated.stderr)
    );
    let report = summary(&rotated);
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(report["resealed"], 9, "{report}");
    assert_eq!(
        column(&report, "suppression_keys.sealed_key")["resealed"],
        1
    );
    assert_eq!(
        column(&report, "feedback_sources.signing_key")["resealed"],
        1
    );
    assert_eq!(
        column(&report, "sending_domain_keys.private_key")["resealed"],
        1
    );
    assert_eq!(column(&report, "mail_servers.password")["resealed"], 3);
    assert_eq!(
        column(&report, "webhook_configs.signing_secret")["resealed"],
        2
    );
    assert_eq!(
        column(&report, "webhook_configs.password_or_token")["resealed"],
        1
    );
    assert_all_open(&mut conn, &stored, &b_alone, "after the rotation, B alone");
    assert!(SealingSecrets::new(&KEY_A)
        .open(&stored_bytes(&mut conn, &first.slot), &first.slot)
        .is_err());

    // Again, now without the previous key: nothing to do, nothing changes.
    let before: Vec<SealedSecret> = stored
        .iter()
        .map(|item| stored_bytes(&mut conn, &item.slot))
        .collect();
    let again = rotate(&database, &KEY_B, None);
    assert!(again.status.success());
    let report = summary(&again);
    assert_eq!(report["complete"], true);
    assert_eq!(report["resealed"], 0);
    assert_eq!(
        column(&report, "mail_servers.password")["alreadyCurrent"],
        3
    );
    assert_eq!(
        column(&report, "webhook_configs.password_or_token")["alreadyCurrent"],
        1
    );
    let after: Vec<SealedSecret> = stored
        .iter()
        .map(|item| stored_bytes(&mut conn, &item.slot))
        .collect();
    assert_eq!(before, after, "a second run rewrites nothing");
    assert_all_open(&mut conn, &stored, &b_alone, "after the second run");
}
