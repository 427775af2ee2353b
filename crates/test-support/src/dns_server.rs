//! A DNS server on loopback for tests: an authoritative responder over a zone the test
//! edits while it runs, on UDP and TCP of one port, speaking through hickory's own
//! message types (no wire format of ours beyond TCP's two-byte length). An answer larger
//! than the asker's UDP payload (512 bytes, or what its EDNS offers) goes out truncated,
//! so the asker retries over TCP, as with a real server. Answers carry TTL 0 and "no such
//! name" carries an SOA whose minimum is 0, so resolvers cache nothing and a record the
//! test publishes is seen by the next lookup.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{MX, SOA, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

type Zone = HashMap<String, Vec<RData>>;

/// A running test DNS server; stops when dropped.
pub struct TestDnsServer {
    address: SocketAddr,
    zone: Arc<Mutex<Zone>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// A UDP socket on a free port of 127.0.0.1 and a TCP listener on the same port (for
/// truncated answers). The UDP port the system picks may be taken for TCP by another test
/// at that moment (seen under load as `AddrInUse`), so a few ports are tried.
fn bind_udp_and_tcp() -> (UdpSocket, TcpListener) {
    let mut last_error = None;
    for _ in 0..20 {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind the test DNS server");
        let address = socket.local_addr().expect("local address");
        match TcpListener::bind(address) {
            Ok(listener) => return (socket, listener),
            Err(error) => last_error = Some(error),
        }
    }
    panic!("bind the test DNS server (TCP): {last_error:?}");
}

impl TestDnsServer {
    /// Binds a UDP port on 127.0.0.1 and answers from an empty zone.
    ///
    /// # Panics
    /// When the socket cannot be bound.
    pub fn start() -> Self {
        let (socket, listener) = bind_udp_and_tcp();
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .expect("read timeout");
        let address = socket.local_addr().expect("local address");
        let zone: Arc<Mutex<Zone>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        // Accepted TCP connections are served on threads of their own, which end with
        // their connection.
        listener.set_nonblocking(true).expect("non-blocking accept");
        {
            let zone = Arc::clone(&zone);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("test-dns-tcp".into())
                .spawn(move || accept(&listener, &zone, &stop))
                .expect("start the test DNS server (TCP)");
        }
        let thread = {
            let zone = Arc::clone(&zone);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("test-dns".into())
                .spawn(move || serve(&socket, &zone, &stop))
                .expect("start the test DNS server")
        };
        Self {
            address,
            zone,
            stop,
            thread: Some(thread),
        }
    }

    /// Where it listens (for `MAILROOM_DNS_SERVER`).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Adds a TXT record at `name`; text longer than 255 bytes is split into strings of
    /// 255, as a zone file would hold it.
    pub fn add_txt(&self, name: &str, text: &str) {
        let strings = text
            .as_bytes()
            .chunks(255)
            .map(|chunk| String::from_utf8_lossy(chunk).into_owned())
            .collect();
        self.add(name, RData::TXT(TXT::new(strings)));
    }

    /// Adds an MX record at `name`.
    ///
    /// # Panics
    /// When `exchange` is not a DNS name.
    pub fn add_mx(&self, name: &str, preference: u16, exchange: &str) {
        let exchange = Name::from_str(&format!("{}.", key(exchange))).expect("an MX exchange");
        self.add(name, RData::MX(MX::new(preference, exchange)));
    }

    /// Removes every record at `name`.
    pub fn remove(&self, name: &str) {
        self.zone.lock().expect("zone").remove(&key(name));
    }

    fn add(&self, name: &str, data: RData) {
        self.zone
            .lock()
            .expect("zone")
            .entry(key(name))
            .or_default()
            .push(data);
    }
}

impl Drop for TestDnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(socket: &UdpSocket, zone: &Mutex<Zone>, stop: &AtomicBool) {
    let mut buffer = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        let Ok((length, peer)) = socket.recv_from(&mut buffer) else {
            continue;
        };
        let Ok(request) = Message::from_vec(&buffer[..length]) else {
            continue;
        };
        let mut response = answer(&request, &zone.lock().expect("zone"));
        let limit = request
            .extensions()
            .as_ref()
            .map_or(512, |edns| usize::from(edns.max_payload().max(512)));
        let Ok(mut bytes) = response.to_vec() else {
            continue;
        };
        if bytes.len() > limit {
            response.take_answers();
            response.take_name_servers();
            response.set_truncated(true);
            let Ok(truncated) = response.to_vec() else {
                continue;
            };
            bytes = truncated;
        }
        let _ = socket.send_to(&bytes, peer);
    }
}

fn accept(listener: &TcpListener, zone: &Arc<Mutex<Zone>>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let zone = Arc::clone(zone);
                let _ = std::thread::Builder::new()
                    .name("test-dns-conn".into())
                    .spawn(move || serve_tcp(stream, &zone));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Queries over one TCP connection, each framed by its two-byte length (RFC 1035 4.2.2).
fn serve_tcp(mut stream: TcpStream, zone: &Mutex<Zone>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    loop {
        let mut length = [0u8; 2];
        if stream.read_exact(&mut length).is_err() {
            return;
        }
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(length))];
        if stream.read_exact(&mut query).is_err() {
            return;
        }
        let Ok(request) = Message::from_vec(&query) else {
            return;
        };
        let Ok(bytes) = answer(&request, &zone.lock().expect("zone")).to_vec() else {
            return;
        };
        let Ok(length) = u16::try_from(bytes.len()) else {
            return;
        };
        if stream.write_all(&length.to_be_bytes()).is_err() || stream.write_all(&bytes).is_err() {
            return;
        }
    }
}

fn answer(request: &Message, zone: &Zone) -> Message {
    let mut response = Message::new();
    response
        .set_id(request.id())
        .set_message_type(MessageType::Response)
        .set_op_code(request.op_code())
        .set_authoritative(true)
        .set_recursion_desired(request.recursion_desired())
        .set_recursion_available(true);
    if let Some(edns) = request.extensions() {
        let mut ours = Edns::new();
        ours.set_max_payload(edns.max_payload().max(512));
        response.set_edns(ours);
    }
    let Some(query) = request.queries().first() else {
        response.set_response_code(ResponseCode::FormErr);
        return response;
    };
    response.add_query(query.clone());
    let name = query.name().clone();
    match zone.get(&key(&name.to_ascii())) {
        None => {
            response.set_response_code(ResponseCode::NXDomain);
            response.add_name_server(soa(&name));
        }
        Some(records) => {
            for data in records {
                let wanted = query.query_type() == RecordType::ANY
                    || data.record_type() == query.query_type();
                if wanted {
                    response.add_answer(Record::from_rdata(name.clone(), 0, data.clone()));
                }
            }
            if response.answers().is_empty() {
                response.add_name_server(soa(&name));
            }
        }
    }
    response
}

/// An SOA for negative answers: TTL and minimum 0, so nothing is cached.
fn soa(name: &Name) -> Record {
    let origin = name.base_name();
    let data = SOA::new(
        Name::from_str("ns.test.").expect("a name"),
        Name::from_str("hostmaster.test.").expect("a name"),
        1,
        60,
        60,
        60,
        0,
    );
    Record::from_rdata(origin, 0, RData::SOA(data))
}
