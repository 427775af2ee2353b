//! An "SMTP server" on loopback that misbehaves on purpose, for the bounds Mailroom puts
//! on what a tenant's server may send: one that streams an endless reply line, one that
//! drips a byte a second.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// How the server misbehaves once it starts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostility {
    /// Writes up to `bytes` bytes without a newline, as fast as the client reads them.
    Stream {
        /// How many bytes at most (1 GiB in the tests).
        bytes: u64,
    },
    /// Writes one byte (never a newline) per `every`, up to `bytes` bytes.
    Drip {
        /// The pause between bytes.
        every: Duration,
        /// How many bytes at most.
        bytes: u64,
    },
}

/// A loopback server that answers the first `polite_commands` commands with `250 ok`
/// (after a proper greeting) and then misbehaves as [`Hostility`] says; with
/// `polite_commands == None` it misbehaves instead of greeting.
pub struct HostileSmtpServer {
    address: SocketAddr,
    sent: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl HostileSmtpServer {
    /// Starts the server on `127.0.0.1`, one thread per connection.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub fn start(polite_commands: Option<usize>, hostility: Hostility) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let address = listener.local_addr().expect("local address");
        let sent = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (sent_by_server, stop_server) = (Arc::clone(&sent), Arc::clone(&stop));
        thread::spawn(move || {
            for connection in listener.incoming() {
                if stop_server.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(connection) = connection else { continue };
                let sent = Arc::clone(&sent_by_server);
                let stop = Arc::clone(&stop_server);
                thread::spawn(move || serve(connection, polite_commands, hostility, &sent, &stop));
            }
        });
        Self {
            address,
            sent,
            stop,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// Bytes of hostile output written so far (over all connections).
    pub fn hostile_bytes_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

impl Drop for HostileSmtpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.address);
    }
}

fn serve(
    connection: TcpStream,
    polite_commands: Option<usize>,
    hostility: Hostility,
    sent: &AtomicU64,
    stop: &AtomicBool,
) {
    let Ok(reader) = connection.try_clone() else {
        return;
    };
    let mut writer = connection;
    if let Some(polite) = polite_commands {
        if writer.write_all(b"220 hostile.test ESMTP\r\n").is_err() {
            return;
        }
        let mut lines = BufReader::new(reader);
        for _ in 0..polite {
            let mut line = String::new();
            match lines.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if writer.write_all(b"250 ok\r\n").is_err() {
                return;
            }
        }
        // Wait for the next command, then answer it badly.
        let mut line = String::new();
        if !matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
            return;
        }
    }
    match hostility {
        Hostility::Stream { bytes } => {
            // A reply code, then no newline ever.
            let chunk = [b'x'; 64 * 1024];
            let _ = writer.write_all(b"250 ");
            let mut written = 0u64;
            while written < bytes && !stop.load(Ordering::Relaxed) {
                let size = chunk
                    .len()
                    .min(usize::try_from(bytes - written).unwrap_or(usize::MAX));
                if writer.write_all(&chunk[..size]).is_err() {
                    return;
                }
                written += size as u64;
                sent.fetch_add(size as u64, Ordering::Relaxed);
            }
        }
        Hostility::Drip { every, bytes } => {
            for index in 0..bytes {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let byte = if index < 3 { b'2' } else { b'x' };
                if writer.write_all(&[byte]).is_err() {
                    return;
                }
                sent.fetch_add(1, Ordering::Relaxed);
                thread::sleep(every);
            }
        }
    }
}
