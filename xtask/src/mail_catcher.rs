//! `cargo xtask mail-catcher`: a development SMTP server that accepts every message and
//! prints it, so Mailroom's mail-server check and sending can be tried without a real
//! mail provider. Plaintext only, any credentials: never expose it beyond localhost.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::system::note;
use crate::Result;

const DEFAULT_LISTEN: &str = "127.0.0.1:2525";
/// What EHLO advertises; larger messages are refused after DATA.
const MAX_MESSAGE: usize = 52_428_800;
/// A command line is at most 512 octets (RFC 5321 §4.5.3.1.4); allow slack for clients
/// that bend that, but never let one endless line fill memory.
const MAX_LINE: u64 = 64 * 1024;
/// Printing megabytes of base64 attachments would bury everything else in the terminal.
const PRINT_CAP: usize = 64 * 1024;
/// No STARTTLS: the catcher has no certificate, and Mailroom's "opportunistic" mode
/// then stays in plaintext, which is what a local catcher wants.
const EHLO_REPLY: &str = "250-mailroom-catcher\r\n250-8BITMIME\r\n\
                          250-SIZE 52428800\r\n250 AUTH PLAIN LOGIN";
/// So that clients that vanish without QUIT do not keep their threads forever.
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// One accepted message: the envelope and the data with dot-stuffing undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: u64,
    pub from: String,
    pub to: Vec<String>,
    pub data: Vec<u8>,
}

/// Receives every accepted message; printing in `run`, a channel in tests.
pub type Sink = Arc<dyn Fn(Message) + Send + Sync>;

/// `cargo xtask mail-catcher [--listen ADDR]`.
pub fn run(args: &[String]) -> Result<()> {
    let listen = match args {
        [] => DEFAULT_LISTEN,
        [flag, addr] if flag == "--listen" => addr.as_str(),
        [arg] if arg.starts_with("--listen=") => &arg["--listen=".len()..],
        _ => return Err("usage: cargo xtask mail-catcher [--listen 127.0.0.1:2525]".to_owned()),
    };
    let listener =
        TcpListener::bind(listen).map_err(|error| format!("cannot listen on {listen}: {error}"))?;
    let address = listener.local_addr().map_err(|error| error.to_string())?;
    note(&format!(
        "mail catcher listening on {address} (any user/password is accepted; Ctrl-C to stop)"
    ));
    serve(listener, Arc::new(print_message));
    Ok(())
}

/// Accepts connections forever, one thread each: slow or stuck clients cannot block others.
pub fn serve(listener: TcpListener, sink: Sink) {
    let counter = Arc::new(AtomicU64::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let (sink, counter) = (Arc::clone(&sink), Arc::clone(&counter));
        thread::spawn(move || {
            if let Err(error) = session(stream, &sink, &counter) {
                note(&format!("mail catcher: connection ended: {error}"));
            }
        });
    }
}

fn session(stream: TcpStream, sink: &Sink, counter: &AtomicU64) -> io::Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    let mut reply = |text: &str| out.write_all(format!("{text}\r\n").as_bytes());
    reply("220 mailroom-catcher ESMTP")?;
    let (mut from, mut to): (Option<String>, Vec<String>) = (None, Vec::new());
    while let Some(line) = read_line(&mut reader, MAX_LINE)? {
        let line = String::from_utf8_lossy(&line);
        let line = line.trim_end_matches(['\r', '\n']);
        let (verb, arg) = line.split_once(' ').unwrap_or((line, ""));
        match verb.to_ascii_uppercase().as_str() {
            "EHLO" => {
                (from, to) = (None, Vec::new());
                reply(EHLO_REPLY)?;
            }
            "HELO" => reply("250 mailroom-catcher")?,
            "AUTH" => {
                // Any user/password is accepted, so the answers are read but not decoded.
                let mut words = arg.split_whitespace();
                let prompts = match words.next().map(str::to_ascii_uppercase).as_deref() {
                    Some("PLAIN") => &["334 "][..],
                    Some("LOGIN") => &["334 VXNlcm5hbWU6", "334 UGFzc3dvcmQ6"][..],
                    _ => {
                        reply("504 5.5.4 mechanism not supported")?;
                        continue;
                    }
                };
                // An initial response (`AUTH PLAIN <base64>`) answers the first prompt.
                for prompt in &prompts[usize::from(words.next().is_some())..] {
                    reply(prompt)?;
                    read_line(&mut reader, MAX_LINE)?;
                }
                reply("235 2.7.0 Authentication successful")?;
            }
            "MAIL" => match address(arg, "FROM:") {
                Some(sender) => {
                    (from, to) = (Some(sender), Vec::new());
                    reply("250 2.1.0 OK")?;
                }
                None => reply("501 5.5.4 syntax: MAIL FROM:<address>")?,
            },
            "RCPT" if from.is_none() => reply("503 5.5.1 MAIL first")?,
            "RCPT" => match address(arg, "TO:") {
                Some(recipient) => {
                    to.push(recipient);
                    reply("250 2.1.5 OK")?;
                }
                None => reply("501 5.5.4 syntax: RCPT TO:<address>")?,
            },
            "DATA" if to.is_empty() => reply("503 5.5.1 RCPT first")?,
            "DATA" => {
                reply("354 End data with <CR><LF>.<CR><LF>")?;
                let Some(data) = read_data(&mut reader)? else {
                    reply("552 5.3.4 message exceeds the advertised SIZE")?;
                    (from, to) = (None, Vec::new());
                    continue;
                };
                let id = counter.fetch_add(1, Ordering::Relaxed) + 1;
                reply(&format!("250 2.0.0 queued as {id}"))?;
                let from = from.take().unwrap_or_default();
                sink(Message {
                    id,
                    from,
                    to: std::mem::take(&mut to),
                    data,
                });
            }
            "RSET" => {
                (from, to) = (None, Vec::new());
                reply("250 2.0.0 OK")?;
            }
            "NOOP" => reply("250 2.0.0 OK")?,
            "QUIT" => return reply("221 2.0.0 Bye"),
            _ => reply("502 5.5.2 command not recognized")?,
        }
    }
    Ok(())
}

/// One line including its terminator, or `None` at end of stream. A line longer than
/// `max` is returned in pieces, which at worst makes its command unrecognised.
fn read_line(reader: &mut impl BufRead, max: u64) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    io::Read::take(&mut *reader, max).read_until(b'\n', &mut line)?;
    Ok((!line.is_empty()).then_some(line))
}

/// Message data up to the lone `.` line, dot-stuffing undone (RFC 5321 §4.5.2). `None`
/// when it is larger than advertised; the data is still read to the end so the
/// connection stays in step.
fn read_data(reader: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut data = Vec::new();
    loop {
        let line = read_line(reader, MAX_LINE)?.ok_or(io::ErrorKind::UnexpectedEof)?;
        if line == b".\r\n" || line == b".\n" {
            return Ok((data.len() <= MAX_MESSAGE).then_some(data));
        }
        let line = line.strip_prefix(b".").unwrap_or(&line);
        if data.len() <= MAX_MESSAGE {
            data.extend_from_slice(line);
        }
    }
}

/// `FROM:<a@example.com> SIZE=12` → `a@example.com` (the `<>` null sender → empty).
fn address(arg: &str, keyword: &str) -> Option<String> {
    let head = arg.get(..keyword.len())?;
    if !head.eq_ignore_ascii_case(keyword) {
        return None;
    }
    let rest = arg[keyword.len()..].trim_start();
    match rest.strip_prefix('<') {
        Some(rest) => rest.split_once('>').map(|(address, _)| address.to_owned()),
        None => rest.split_whitespace().next().map(str::to_owned),
    }
}

/// One `print!`, which holds the stdout lock, so messages arriving together do not
/// interleave.
fn print_message(Message { id, from, to, data }: Message) {
    let shown = String::from_utf8_lossy(&data[..data.len().min(PRINT_CAP)]);
    let hidden = match data.len().saturating_sub(PRINT_CAP) {
        0 => String::new(),
        hidden => format!("[... {hidden} more bytes not shown]\n"),
    };
    let newline = if shown.ends_with('\n') { "" } else { "\n" };
    print!(
        "======== message {id} ({} bytes) ========\nFrom: {from}\nTo: {}\n\n{shown}{newline}{hidden}",
        data.len(),
        to.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Reads one reply, following `250-` continuation lines to the final `250 ` line.
    fn reply(reader: &mut impl BufRead) -> String {
        let mut text = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("a reply");
            assert!(line.ends_with("\r\n"), "{line:?} does not end with CRLF");
            text.push_str(&line);
            if line.as_bytes().get(3) != Some(&b'-') {
                return text;
            }
        }
    }

    #[test]
    fn a_full_session_is_captured() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let (sender, received) = mpsc::channel();
        thread::spawn(move || {
            serve(
                listener,
                Arc::new(move |message| sender.send(message).unwrap()),
            )
        });

        let mut client = TcpStream::connect(address).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut reader = BufReader::new(client.try_clone().unwrap());
        let mut say = |line: &str, reader: &mut BufReader<TcpStream>| {
            client.write_all(line.as_bytes()).unwrap();
            reply(reader)
        };
        assert_eq!(reply(&mut reader), "220 mailroom-catcher ESMTP\r\n");
        assert_eq!(
            say("EHLO client\r\n", &mut reader),
            "250-mailroom-catcher\r\n250-8BITMIME\r\n250-SIZE 52428800\r\n250 AUTH PLAIN LOGIN\r\n"
        );
        assert_eq!(
            say("AUTH PLAIN AHUAcA==\r\n", &mut reader),
            "235 2.7.0 Authentication successful\r\n"
        );
        assert_eq!(say("AUTH LOGIN\r\n", &mut reader), "334 VXNlcm5hbWU6\r\n");
        assert_eq!(say("dQ==\r\n", &mut reader), "334 UGFzc3dvcmQ6\r\n");
        assert_eq!(
            say("cA==\r\n", &mut reader),
            "235 2.7.0 Authentication successful\r\n"
        );
        assert_eq!(
            say("STARTTLS\r\n", &mut reader),
            "502 5.5.2 command not recognized\r\n"
        );
        assert!(say("MAIL FROM:<a@example.com> SIZE=40\r\n", &mut reader).starts_with("250 "));
        assert!(say("RCPT TO:<b@example.com>\r\n", &mut reader).starts_with("250 "));
        assert!(say("DATA\r\n", &mut reader).starts_with("354 "));
        let body = "Subject: hi\r\n\r\n..leading dot\r\nhello\r\n.\r\n";
        assert_eq!(say(body, &mut reader), "250 2.0.0 queued as 1\r\n");
        assert_eq!(say("QUIT\r\n", &mut reader), "221 2.0.0 Bye\r\n");

        let message = received.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(
            message,
            Message {
                id: 1,
                from: "a@example.com".to_owned(),
                to: vec!["b@example.com".to_owned()],
                data: b"Subject: hi\r\n\r\n.leading dot\r\nhello\r\n".to_vec(),
            }
        );
    }
}
