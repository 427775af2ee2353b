//! Bounds on what an SMTP server may send in reply, under lettre.
//!
//! lettre reads a reply line into a growing `String` and checks its own limits only once
//! the line has ended, so a server that streams bytes without a newline grows Mailroom's
//! memory without bound. [`BoundedReplies`] sits between lettre and the connection and
//! fails the read as soon as a line passes [`MAX_LINE_BYTES`] or a reply passes
//! [`MAX_REPLY_BYTES`]. "A reply" is everything read between two writes, plus the
//! greeting: one command's answer, or a pipelined envelope's (`MAIL FROM`, the `RCPT
//! TO`s, `DATA`: a few hundred bytes, far under the bound).
//!
//! After the client writes `STARTTLS`, the bytes on this layer are TLS records, whose
//! "lines" mean nothing: lines are no longer counted there, but the per-reply bound still
//! holds (on the ciphertext, which is slightly larger than the reply it carries), so
//! memory stays bounded. Under implicit TLS the wrapper sits above the TLS session and
//! counts the plaintext.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use lettre::transport::smtp::client::AsyncTokioStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest reply line accepted, CRLF included. RFC 5321 §4.5.3.1.5 sets 512 octets;
/// real servers exceed that with long EHLO keywords and texts, never by this much.
pub const MAX_LINE_BYTES: usize = 4 * 1024;

/// The longest reply accepted, all its lines together (a long EHLO reply is about 1 KiB).
pub const MAX_REPLY_BYTES: usize = 64 * 1024;

/// The server sent a reply longer than the bounds allow. Travels inside an
/// [`io::Error`] of kind `InvalidData`, so callers can recognise it in lettre's errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyTooLong {
    /// What was exceeded.
    pub what: Exceeded,
}

/// Which bound a reply exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    /// [`MAX_LINE_BYTES`].
    Line,
    /// [`MAX_REPLY_BYTES`].
    Reply,
}

impl fmt::Display for ReplyTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.what {
            Exceeded::Line => write!(
                f,
                "the mail server sent a reply line longer than {MAX_LINE_BYTES} bytes"
            ),
            Exceeded::Reply => write!(
                f,
                "the mail server sent a reply longer than {MAX_REPLY_BYTES} bytes"
            ),
        }
    }
}

impl std::error::Error for ReplyTooLong {}

/// A connection whose reads fail once a reply line or a reply is too long. Once failed,
/// it stays failed: lettre must not go on reading a stream cut mid-reply.
#[derive(Debug)]
pub struct BoundedReplies<S> {
    inner: S,
    /// Bytes of the current line so far.
    line: usize,
    /// Bytes read since the last write.
    reply: usize,
    /// `STARTTLS` was written: TLS records follow on this layer.
    opaque: bool,
    failed: Option<ReplyTooLong>,
}

impl<S> BoundedReplies<S> {
    /// Bounds the replies read from `inner`.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            line: 0,
            reply: 0,
            opaque: false,
            failed: None,
        }
    }

    /// Counts `bytes` just read; the bound they break, if any.
    fn count(&mut self, bytes: &[u8]) -> Option<ReplyTooLong> {
        self.reply += bytes.len();
        if self.reply > MAX_REPLY_BYTES {
            return Some(ReplyTooLong {
                what: Exceeded::Reply,
            });
        }
        if self.opaque {
            return None;
        }
        for &byte in bytes {
            self.line = if byte == b'\n' { 0 } else { self.line + 1 };
            if self.line >= MAX_LINE_BYTES {
                return Some(ReplyTooLong {
                    what: Exceeded::Line,
                });
            }
        }
        None
    }
}

/// `stream` as lettre's transport, with its replies bounded.
pub(crate) fn bounded<S: AsyncTokioStream + 'static>(stream: S) -> Box<dyn AsyncTokioStream> {
    Box::new(BoundedReplies::new(stream))
}

fn too_long(error: ReplyTooLong) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, error)
}

impl<S: AsyncRead + Unpin> AsyncRead for BoundedReplies<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(error) = this.failed {
            return Poll::Ready(Err(too_long(error)));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if let Some(error) = this.count(&buf.filled()[before..]) {
                    // Hand lettre none of it: the reply is refused whole.
                    buf.set_filled(before);
                    this.failed = Some(error);
                    return Poll::Ready(Err(too_long(error)));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for BoundedReplies<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(count)) = written {
            if count > 0 {
                // A command (or message content) went out: what comes next is its reply.
                this.reply = 0;
                this.line = 0;
                if buf.len() >= 8 && buf[..8].eq_ignore_ascii_case(b"STARTTLS") {
                    this.opaque = true;
                }
            }
        }
        written
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<S: AsyncTokioStream> AsyncTokioStream for BoundedReplies<S> {
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn read_all(bytes: Vec<u8>) -> Result<Vec<u8>, io::Error> {
        let (mut server, client) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            let _ = server.write_all(&bytes).await;
        });
        let mut bounded = BoundedReplies::new(client);
        let mut out = Vec::new();
        let mut chunk = [0u8; 512];
        loop {
            match bounded.read(&mut chunk).await? {
                0 => return Ok(out),
                n => out.extend_from_slice(&chunk[..n]),
            }
        }
    }

    fn kind(error: &io::Error) -> Option<Exceeded> {
        error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<ReplyTooLong>())
            .map(|too_long| too_long.what)
    }

    #[tokio::test]
    async fn a_line_of_4095_bytes_passes_and_one_of_4096_fails() {
        let mut line = vec![b'a'; 4093];
        line.extend_from_slice(b"\r\n");
        assert_eq!(read_all(line.clone()).await.unwrap().len(), 4095);
        let mut long = vec![b'a'; 4096];
        long.extend_from_slice(b"\r\n");
        let error = read_all(long).await.unwrap_err();
        assert_eq!(kind(&error), Some(Exceeded::Line), "{error}");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }

    #[tokio::test]
    async fn a_reply_of_many_short_lines_fails_past_64_kib() {
        let line = b"250-a line of a long reply\r\n";
        let lines = MAX_REPLY_BYTES / line.len() + 1;
        let error = read_all(line.repeat(lines)).await.unwrap_err();
        assert_eq!(kind(&error), Some(Exceeded::Reply), "{error}");
        assert!(read_all(line.repeat(lines - 2)).await.is_ok());
    }

    #[tokio::test]
    async fn a_write_starts_a_new_reply_and_starttls_stops_line_counting() {
        let (mut server, client) = tokio::io::duplex(1 << 20);
        let mut bounded = BoundedReplies::new(client);
        let mut sink = vec![0u8; 64 * 1024];
        // 40 KiB twice, with a write between: each reply is within the bound.
        for _ in 0..2 {
            server
                .write_all(&b"250-ok\r\n".repeat(5 * 1024))
                .await
                .unwrap();
            let mut read = 0;
            while read < 40 * 1024 {
                read += bounded.read(&mut sink).await.unwrap();
            }
            bounded.write_all(b"NOOP\r\n").await.unwrap();
        }
        // After STARTTLS, 8 KiB without a newline (a TLS record) passes.
        bounded.write_all(b"STARTTLS\r\n").await.unwrap();
        server.write_all(&[0x17; 8 * 1024]).await.unwrap();
        let mut read = 0;
        while read < 8 * 1024 {
            read += bounded.read(&mut sink).await.unwrap();
        }
    }
}
