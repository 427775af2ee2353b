//! SMTP faults at random: a server that answers each delivery attempt at random
//! with 250, 421, 450, 451, 550 5.1.1 or 552, drops the connection after DATA, or stalls.
//! After the worker has run until nothing is pending, every message is in the state the
//! rules give for the replies it got (read from the server's own record of each attempt),
//! its attempt count matches the server's, and none is left `queued` or `sending`.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    net::TcpListener,
    sync::{Arc, Mutex},
    time::Duration,
};

use mailroom_domain::{AccountId, MailServerId};
use rand::{rngs::StdRng, Rng, SeedableRng};
use reqwest::Method;
use serde_json::json;

use crate::campaign_setup::Setup;

const MESSAGES: usize = 40;
const MAX_ATTEMPTS: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Accept,
    /// A reply to RCPT TO; a 421 also closes the connection, as RFC 5321 says.
    Rcpt(&'static str),
    DropAfterData,
    Stall,
}

const FAULTS: [Fault; 8] = [
    Fault::Accept,
    Fault::Rcpt("421 4.3.2 shutting down"),
    Fault::Rcpt("450 4.2.1 mailbox busy"),
    Fault::Rcpt("451 4.3.0 local error"),
    Fault::Rcpt("550 5.1.1 no such user"),
    Fault::Rcpt("552 5.2.2 mailbox full"),
    Fault::DropAfterData,
    Fault::Stall,
];

/// What the server did to each recipient, transaction by transaction, and whether the
/// transaction came on a connection that had carried one before (a pooled connection).
type Record = Arc<Mutex<HashMap<String, Vec<(Fault, bool)>>>>;

/// The chaos server: every attempt draws its fault from the seeded generator.
fn chaos_server(seed: u64) -> (u16, Record) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let record: Record = Arc::default();
    let rng = Arc::new(Mutex::new(StdRng::seed_from_u64(seed)));
    let shared = record.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (record, rng) = (shared.clone(), rng.clone());
            std::thread::spawn(move || serve(stream, &record, &rng));
        }
    });
    (port, record)
}

fn serve(mut stream: std::net::TcpStream, record: &Record, rng: &Mutex<StdRng>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let _ = stream.write_all(b"220 chaos ESMTP\r\n");
    let mut line = String::new();
    let mut pending = Fault::Accept;
    let mut in_data = false;
    let mut transactions = 0;
    while reader.read_line(&mut line).unwrap_or(0) > 0 {
        let command = line.trim_end().to_owned();
        line.clear();
        let upper = command.to_ascii_uppercase();
        if in_data {
            if command != "." {
                continue;
            }
            in_data = false;
            match pending {
                Fault::DropAfterData => return,
                Fault::Stall => {
                    std::thread::sleep(Duration::from_secs(3));
                    return;
                }
                _ => {
                    let _ = stream.write_all(b"250 2.0.0 queued\r\n");
                }
            }
        } else if upper.starts_with("EHLO") || upper.starts_with("HELO") {
            let _ = stream.write_all(b"250 chaos\r\n");
        } else if upper.starts_with("RCPT TO:") {
            let recipient = command[8..]
                .trim()
                .trim_start_matches('<')
                .split('>')
                .next()
                .unwrap_or_default()
                .to_owned();
            let fault = {
                let mut rng = rng.lock().expect("rng");
                FAULTS[rng.gen_range(0..FAULTS.len())]
            };
            record
                .lock()
                .expect("record")
                .entry(recipient)
                .or_default()
                .push((fault, transactions > 0));
            transactions += 1;
            pending = fault;
            match fault {
                Fault::Rcpt(reply) => {
                    let _ = stream.write_all(format!("{reply}\r\n").as_bytes());
                    if reply.starts_with("421") {
                        return;
                    }
                }
                _ => {
                    let _ = stream.write_all(b"250 2.1.5 ok\r\n");
                }
            }
        } else if upper.starts_with("DATA") {
            in_data = true;
            let _ = stream.write_all(b"354 go ahead\r\n");
        } else if upper.starts_with("QUIT") {
            let _ = stream.write_all(b"221 bye\r\n");
            return;
        } else {
            // MAIL, RSET, NOOP.
            let _ = stream.write_all(b"250 ok\r\n");
        }
    }
}

/// The final status the rules give for these transactions, and how many attempts they
/// make. A 421 before DATA on a pooled connection means the connection is gone, and the
/// mailer tries once more on a fresh one within the same attempt (nothing was sent).
fn expected(faults: &[(Fault, bool)]) -> (&'static str, usize) {
    let mut attempt = 0;
    for (fault, reused) in faults {
        if matches!(fault, Fault::Rcpt(reply) if reply.starts_with("421")) && *reused {
            continue;
        }
        attempt += 1;
        match fault {
            Fault::Accept => return ("sent", attempt),
            Fault::Rcpt(reply) if reply.starts_with("550 5.1.1") => return ("bounced", attempt),
            Fault::Rcpt(reply) if reply.starts_with('5') => return ("failed", attempt),
            _ if attempt == MAX_ATTEMPTS as usize => return ("failed", attempt),
            _ => {}
        }
    }
    ("queued", attempt)
}

#[tokio::test]
async fn random_smtp_faults_end_every_message_in_the_state_the_rules_give() {
    let setup = Setup::new_with(|config| {
        config.message_max_attempts = MAX_ATTEMPTS;
        config.smtp_timeout = Duration::from_secs(1);
    })
    .await;
    let seed: u64 = std::env::var("MAILROOM_FUZZ_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    println!("seed {seed} (set MAILROOM_FUZZ_SEED to replay)");
    let (port, record) = chaos_server(seed);
    // The mail server was saved against the well-behaved server; point it at chaos.
    let servers = setup.get("/mail-servers").await;
    let server = MailServerId::parse(servers["items"][0]["_id"].as_str().unwrap()).unwrap();
    let account = AccountId::parse(&setup.account).unwrap();
    let services = setup.app.services.clone();
    tokio::task::spawn_blocking(move || {
        mailroom_app::ports::in_transaction(services.db.as_ref(), |tx| {
            let mut stored = tx.find_mail_server(account, server)?.expect("stored");
            stored.server.port = port;
            tx.update_mail_server(account, &stored)?;
            Ok(())
        })
    })
    .await
    .expect("task")
    .expect("repointed");

    for n in 0..MESSAGES {
        setup
            .ok(
                Method::POST,
                "/messages",
                &json!({"slug": "news", "email": format!("r{n:02}@example.org")}),
            )
            .await;
    }
    // Rounds until nothing is pending; the clock jumps past the longest backoff between.
    for _ in 0..10 {
        setup.drain_messages().await;
        setup.app.clock.advance(time::Duration::hours(7));
    }

    let messages = setup.messages().await;
    assert_eq!(messages.len(), MESSAGES);
    let record = record.lock().expect("record").clone();
    let mut tally: HashMap<&str, usize> = HashMap::new();
    for message in &messages {
        let email = message["email"].as_str().unwrap();
        let faults = record.get(email).cloned().unwrap_or_default();
        let (status, attempts) = expected(&faults);
        assert_eq!(
            message["status"], status,
            "seed {seed}: {email} got {faults:?}: {message}"
        );
        assert_eq!(
            message["attempts"].as_u64(),
            Some(attempts as u64),
            "seed {seed}: {email} got {faults:?}: {message}"
        );
        *tally.entry(status).or_default() += 1;
    }
    assert_eq!(setup.get("/messages/count?status=queued").await["count"], 0);
    assert_eq!(
        setup.get("/messages/count?status=sending").await["count"],
        0
    );
    // The clock moved over several days: the counters of the whole window add up.
    let days = setup.get("/messages/stats").await;
    let total = |counter: &str| -> u64 {
        days.as_array()
            .unwrap()
            .iter()
            .map(|day| day[counter].as_u64().unwrap())
            .sum()
    };
    for (counter, status) in [
        ("sent", "sent"),
        ("bounced", "bounced"),
        ("failed", "failed"),
    ] {
        assert_eq!(
            total(counter),
            tally.get(status).copied().unwrap_or(0) as u64,
            "seed {seed}: {counter}"
        );
    }
    println!("{MESSAGES} messages under random faults: {tally:?}");
}
