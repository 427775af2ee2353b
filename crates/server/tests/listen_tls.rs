//! The queue's LISTEN connection over TLS, against a private PostgreSQL cluster with
//! `ssl = on` and a server certificate from a CA made here: with `sslmode=verify-full` and
//! that CA as `sslrootcert` the listener hears over TLS (the server's `pg_stat_ssl` says
//! so); with another CA it never listens, and the workers would poll.

mod outage_support;

use std::time::Duration;

use base64::Engine as _;
use diesel::{
    connection::SimpleConnection, sql_query, sql_types::BigInt, Connection, PgConnection,
    QueryableByName, RunQueryDsl,
};
use mailroom_app::ports::QueueEvent;
use outage_support::{PrivateCluster, ScratchDir};
use tokio::sync::mpsc;

/// How long the listener may take to connect and say so.
const PATIENCE: Duration = Duration::from_secs(15);

fn pem(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|line| std::str::from_utf8(line).expect("base64 is ASCII"))
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// A CA: its certificate (PEM) and the issuer that signs with it.
fn certificate_authority(name: &str) -> (String, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let key = rcgen::KeyPair::generate().expect("CA key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let certificate = params.self_signed(&key).expect("CA certificate");
    (
        pem("CERTIFICATE", certificate.der()),
        rcgen::Issuer::new(params, key),
    )
}

fn listen(
    url: String,
) -> (
    tokio::task::JoinHandle<()>,
    mpsc::UnboundedReceiver<QueueEvent>,
) {
    let (heard, events) = mpsc::unbounded_channel();
    let listener = tokio::spawn(mailroom_postgres::listen_for_queued_messages(
        url,
        move |event| {
            let _ = heard.send(event);
        },
    ));
    (listener, events)
}

/// Waits for `wanted`; `false` when the patience ran out first.
async fn heard(events: &mut mpsc::UnboundedReceiver<QueueEvent>, wanted: QueueEvent) -> bool {
    tokio::time::timeout(PATIENCE, async {
        while let Some(event) = events.recv().await {
            if event == wanted {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false)
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[tokio::test]
async fn the_listener_hears_over_tls_with_verify_full_and_refuses_a_server_another_ca_signed() {
    let cluster = match PrivateCluster::start() {
        Ok(cluster) => cluster,
        Err(reason) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: {reason}");
            return;
        }
        Err(reason) => panic!("{reason}"),
    };
    let (ca_pem, ca) = certificate_authority("Mailroom test CA");
    let (other_ca_pem, _) = certificate_authority("Another CA");
    let server_key = rcgen::KeyPair::generate().expect("server key");
    let server = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .expect("server params")
        .signed_by(&server_key, &ca)
        .expect("server certificate");
    cluster
        .write_private_file("server.crt", &pem("CERTIFICATE", server.der()))
        .expect("server.crt");
    cluster
        .write_private_file(
            "server.key",
            &pem("PRIVATE KEY", &server_key.serialize_der()),
        )
        .expect("server.key");
    let plain_url = cluster.url("postgres");
    let mut admin = PgConnection::establish(&plain_url).expect("the cluster");
    // Two statements: several in one simple query run as one transaction, which ALTER
    // SYSTEM refuses.
    admin
        .batch_execute("ALTER SYSTEM SET ssl = on")
        .expect("ssl on");
    admin
        .batch_execute("SELECT pg_reload_conf()")
        .expect("reload");
    tokio::time::sleep(Duration::from_millis(500)).await;

    let dir = ScratchDir::new("listen-tls");
    let ca_file = dir.path.join("ca.pem");
    let other_file = dir.path.join("other-ca.pem");
    std::fs::write(&ca_file, &ca_pem).expect("ca.pem");
    std::fs::write(&other_file, &other_ca_pem).expect("other-ca.pem");

    let url = |root: &std::path::Path| {
        format!(
            "{plain_url}?sslmode=verify-full&sslrootcert={}",
            root.display()
        )
    };
    let (listener, mut events) = listen(url(&ca_file));
    assert!(
        heard(&mut events, QueueEvent::Listening).await,
        "the listener connects with verify-full to a server the CA signed\n{}",
        cluster.log_tail()
    );
    let over_tls = sql_query(
        "SELECT count(*) AS n FROM pg_stat_ssl s JOIN pg_stat_activity a ON a.pid = s.pid \
         WHERE s.ssl AND a.query LIKE 'LISTEN%'",
    )
    .get_result::<Count>(&mut admin)
    .expect("pg_stat_ssl");
    assert_eq!(over_tls.n, 1, "the LISTEN connection is encrypted");
    admin
        .batch_execute("NOTIFY mailroom_messages_queued")
        .expect("notify");
    assert!(
        heard(&mut events, QueueEvent::Queued).await,
        "a wake-up arrives"
    );
    listener.abort();

    let (refused, mut events) = listen(url(&other_file));
    assert!(
        !heard(&mut events, QueueEvent::Listening).await,
        "a server certificate another CA signed is refused"
    );
    refused.abort();
}
