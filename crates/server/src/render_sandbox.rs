//! Rendering in child processes whose memory is bounded.
//!
//! minijinja's fuel bounds the instructions a template runs, not the memory the values it
//! builds take: `{% set x = "x" * 100000000 %}` and a few `{% set x = x ~ x %}` allocate
//! gigabytes in a handful of instructions. A worker that rendered in its own process would
//! be killed by that, and so would every worker that claimed the message next.
//!
//! So `mailroom worker` (and `serve` with workers) renders in `mailroom render-sandbox`
//! children, started through `/bin/sh` with `ulimit -v` so each runs under a bounded
//! address space ([`SANDBOX_ADDRESS_SPACE`], `RLIMIT_AS`; the child checks the bound in
//! `/proc/self/limits` and refuses to run without it), rendering requests in batches over
//! its standard input and output: one JSON line in (an array of up to [`BATCH_REQUESTS`]
//! requests, read whole before anything is written back, so neither side waits on the
//! other's pipe) and one JSON line out per request. A render that exceeds the bound makes
//! the child's allocation fail and the child abort; the worker sees the pipe close, keeps
//! the replies it read, and renders the rest of that batch one request at a time on fresh
//! children, so the request that kills a child fails alone, with the reason
//! (docs/operations.md, "Renders in batches"). The child runs with an empty environment:
//! it needs no secret and gets none.
//!
//! Each child keeps the templates it compiled, keyed by the digest of their fields
//! ([`TemplateFields::digest`], computed once per claim), bounded to
//! [`CACHED_TEMPLATES`] templates and [`CACHED_TEMPLATE_BYTES`] of their sources (tenants
//! write templates, so the cache must not grow with them; a template larger than the bound
//! is compiled for each render, as every template was before). The worker sends a
//! template's fields with its digest the first time it asks a child for it, and only the
//! digest after that; a child that no longer holds it answers `Uncached` and gets the
//! fields again. Before, every message carried its template's sources over the pipe and
//! was lexed and parsed again (docs/operations.md, "Delivery engine").

use std::rc::Rc;
use std::{
    collections::HashSet,
    io::{self, BufRead, BufReader, BufWriter, Write},
    path::PathBuf,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
};

use mailroom_app::{
    messages::{render_in_process, RenderJob, RenderOutcome},
    rendering::{
        AccountDefaults, CompiledTemplate, MessageLinks, Recipient, RenderRequest, RenderedMessage,
        SendData, ServerDefaults, TemplateFields,
    },
};
use serde::{Deserialize, Serialize};

/// The address space one render child may map: the binary and its libraries take a few
/// tens of MiB of it, the rest bounds what one render can allocate.
pub const SANDBOX_ADDRESS_SPACE: u64 = 512 * 1024 * 1024;

/// How many compiled templates one render child keeps.
pub const CACHED_TEMPLATES: usize = 32;

/// How many bytes of template source the compiled templates one render child keeps may
/// come from. Compiled, a template takes a few times its source (more for sources made of
/// many tiny expressions), so this keeps the cache well inside
/// [`SANDBOX_ADDRESS_SPACE`].
pub const CACHED_TEMPLATE_BYTES: usize = 4 * 1024 * 1024;

/// The hidden subcommand that runs a render child.
pub const SANDBOX_SUBCOMMAND: &str = "render-sandbox";

/// How the worker renders.
#[derive(Clone)]
pub enum Renderer {
    /// In the worker's own process: bounded in time and output only. For tests that embed
    /// the application (they have no `mailroom` binary to start).
    InProcess,
    /// In `mailroom render-sandbox` children of this binary.
    Sandboxed(Arc<RenderSandbox>),
}

impl Renderer {
    /// The renderer for a worker: sandboxed when the configuration names the `mailroom`
    /// binary to start children of, else in-process.
    pub fn for_program(program: Option<PathBuf>) -> Self {
        match program {
            Some(program) => Self::Sandboxed(Arc::new(RenderSandbox::new(program, 2))),
            None => Self::InProcess,
        }
    }

    /// Renders each job, in order; `None` for a job no render child could be started for
    /// (the message stays claimed and is retried after its lease, like a crash).
    pub fn render_all(&self, jobs: &[RenderJob]) -> Vec<Option<RenderOutcome>> {
        match self {
            Self::InProcess => jobs
                .iter()
                .map(|job| Some(render_in_process(job)))
                .collect(),
            Self::Sandboxed(sandbox) => {
                let requests: Vec<&RenderRequest> = jobs.iter().map(|job| &job.request).collect();
                sandbox.render_all(&requests)
            }
        }
    }
}

/// Previews (`POST …/templates/{templateId}/preview`) render here too, so the HTTP
/// process never runs a tenant's template outside the sandbox in production.
impl mailroom_app::ports::TemplateRenderer for Renderer {
    fn render(&self, request: &RenderRequest) -> Result<RenderedMessage, Option<String>> {
        match self {
            Self::InProcess => request.render().map_err(|error| Some(error.to_string())),
            Self::Sandboxed(sandbox) => match sandbox.render(request) {
                Some(outcome) => outcome.map_err(Some),
                None => Err(None),
            },
        }
    }
}

/// The most render requests one batch carries to a child.
pub const BATCH_REQUESTS: usize = 32;

/// A batch ends after the request that brings it past this many bytes, so what a child
/// reads at once stays well inside its address space.
pub const BATCH_BYTES: usize = 1024 * 1024;

/// The buffer on each side of a child's replies: a pipe's capacity on Linux, so the
/// child writes a batch's replies (about 5 KB each) in pipe-sized pieces and the worker
/// takes each piece in one read. With the default 8 KiB the worker's blocking thread woke
/// about twenty times per batch of 32 messages.
const REPLY_BUFFER: usize = 64 * 1024;

/// A small pool of render children, each used by one batch at a time.
pub struct RenderSandbox {
    program: PathBuf,
    children: Vec<Mutex<Option<RenderChild>>>,
    next: AtomicUsize,
}

struct RenderChild {
    process: Child,
    input: BufWriter<ChildStdin>,
    output: BufReader<ChildStdout>,
    /// The digests of the templates this child was sent, so most likely holds compiled
    /// (it may have evicted some: it then answers `Uncached`). Forgotten past
    /// [`CACHED_TEMPLATES`], which only costs sending those templates again.
    sent: HashSet<Arc<str>>,
}

impl Drop for RenderChild {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// How a batch sent to a render child ended.
enum BatchEnd {
    /// Every request answered, in order.
    Answered(Vec<RenderOutcome>),
    /// The child died (or stopped making sense) after answering these.
    Died {
        answered: Vec<RenderOutcome>,
        status: String,
    },
    /// No child could be started.
    NoChild,
}

/// One render's answer on the child's standard output.
#[derive(Serialize, Deserialize)]
enum SandboxReply {
    Rendered(Box<RenderedMessage>),
    Failed(String),
    /// The request named a template by digest only and the child does not hold it.
    Uncached,
}

/// One render request as the worker writes it: a [`RenderRequest`] whose template's
/// fields are left out when the child was sent them before.
#[derive(Serialize)]
struct SandboxRequest<'a> {
    digest: Option<&'a str>,
    template: Option<&'a TemplateFields>,
    account: &'a AccountDefaults,
    server: &'a ServerDefaults,
    recipient: &'a Recipient,
    data: &'a SendData,
    links: &'a MessageLinks,
}

/// [`SandboxRequest`] as the child reads it.
#[derive(Deserialize)]
struct ChildRequest {
    digest: Option<String>,
    template: Option<TemplateFields>,
    account: AccountDefaults,
    server: ServerDefaults,
    recipient: Recipient,
    data: SendData,
    links: MessageLinks,
}

impl RenderSandbox {
    /// A pool of `size` children of `program` (the `mailroom` binary), started on first
    /// use.
    pub fn new(program: PathBuf, size: usize) -> Self {
        Self {
            program,
            children: (0..size.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Renders one request (a batch of one).
    fn render(&self, request: &RenderRequest) -> Option<RenderOutcome> {
        self.render_all(&[request]).pop().flatten()
    }

    /// Renders the requests in batches: one write of up to [`BATCH_REQUESTS`] requests
    /// and one read of their replies, where one round trip per request used to wake the
    /// worker and the child for each message. A child that dies within a batch of several
    /// leaves its unanswered requests to be rendered one batch of one each, on fresh
    /// children, so the request that kills a child is the only one failed for it.
    pub fn render_all(&self, requests: &[&RenderRequest]) -> Vec<Option<RenderOutcome>> {
        let mut outcomes: Vec<Option<RenderOutcome>> = Vec::with_capacity(requests.len());
        let mut rest = requests;
        while !rest.is_empty() {
            let (taken, end) = self.render_batch(rest);
            let batch = &rest[..taken];
            match end {
                BatchEnd::Answered(answered) => outcomes.extend(answered.into_iter().map(Some)),
                BatchEnd::NoChild => outcomes.extend(batch.iter().map(|_| None)),
                BatchEnd::Died { answered, status } => {
                    let count = answered.len();
                    outcomes.extend(answered.into_iter().map(Some));
                    if taken == 1 {
                        // The request alone killed its child.
                        outcomes.push(Some(Err(format!(
                            "rendering stopped: the render process ended ({status}); the \
                             template most likely needs more than the {} MiB a render may use",
                            SANDBOX_ADDRESS_SPACE / (1024 * 1024)
                        ))));
                    } else {
                        for request in &batch[count..] {
                            outcomes.push(self.render(request));
                        }
                    }
                }
            }
            rest = &rest[taken..];
        }
        outcomes
    }

    /// Sends one batch from the front of `requests` to a child and reads its replies:
    /// how many requests the batch took, and how it ended.
    fn render_batch(&self, requests: &[&RenderRequest]) -> (usize, BatchEnd) {
        let slot = self.next.fetch_add(1, Ordering::Relaxed) % self.children.len();
        let mut child = self.children[slot]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if child.is_none() {
            match self.spawn() {
                Ok(started) => *child = Some(started),
                Err(error) => {
                    tracing::error!(%error, program = %self.program.display(), "the render process cannot start");
                    return (requests.len().min(BATCH_REQUESTS), BatchEnd::NoChild);
                }
            }
        }
        let Some(running) = child.as_mut() else {
            return (requests.len().min(BATCH_REQUESTS), BatchEnd::NoChild);
        };
        let (taken, result) = exchange_batch(running, requests);
        match result {
            Ok(answered) => (taken, BatchEnd::Answered(answered)),
            Err((error, answered)) => {
                // Killed first: a child that answered out of step is still running, and
                // waiting for it would hang this thread. A child that died keeps the
                // status it died with.
                let status = child.take().map_or_else(String::new, |mut gone| {
                    let _ = gone.process.kill();
                    gone.process
                        .wait()
                        .map_or_else(|e| e.to_string(), |s| s.to_string())
                });
                tracing::warn!(%error, %status, answered = answered.len(), taken, "a render process stopped; starting a fresh one");
                (taken, BatchEnd::Died { answered, status })
            }
        }
    }

    fn spawn(&self) -> io::Result<RenderChild> {
        // `ulimit -v` (KiB) sets RLIMIT_AS for the shell, which `exec` hands to the child.
        let mut process = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v {} && exec \"$0\" {SANDBOX_SUBCOMMAND}",
                SANDBOX_ADDRESS_SPACE / 1024
            ))
            .arg(&self.program)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let input = process
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("no stdin"))?;
        let output = process
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        Ok(RenderChild {
            process,
            input: BufWriter::new(input),
            output: BufReader::with_capacity(REPLY_BUFFER, output),
            sent: HashSet::new(),
        })
    }
}

/// Writes one batch (one line: a JSON array of requests, a template's fields sent only
/// the first time this child gets them) and reads one reply line per request; then each
/// request the child answered `Uncached` (it evicted the template) goes again alone, with
/// the fields. Returns how many requests the batch took, and their outcomes, or the error
/// with the outcomes read before it.
#[allow(clippy::type_complexity)]
fn exchange_batch(
    child: &mut RenderChild,
    requests: &[&RenderRequest],
) -> (
    usize,
    Result<Vec<RenderOutcome>, (io::Error, Vec<RenderOutcome>)>,
) {
    let mut line = b"[".to_vec();
    let mut sending: HashSet<&Arc<str>> = HashSet::new();
    let mut taken = 0;
    for request in requests.iter().take(BATCH_REQUESTS) {
        let digest = request.template_digest.as_ref();
        let known = digest.is_some_and(|d| child.sent.contains(d) || sending.contains(d));
        if taken > 0 {
            line.push(b',');
        }
        taken += 1;
        if let Err(error) = serde_json::to_writer(&mut line, &wire_request(request, !known)) {
            return (taken, Err((io::Error::other(error), Vec::new())));
        }
        if let Some(digest) = digest {
            sending.insert(digest);
        }
        if line.len() > BATCH_BYTES {
            break;
        }
    }
    line.extend_from_slice(b"]\n");
    let written = child
        .input
        .write_all(&line)
        .and_then(|()| child.input.flush());
    if let Err(error) = written {
        return (taken, Err((error, Vec::new())));
    }
    let mut replies = Vec::with_capacity(taken);
    for _ in 0..taken {
        match read_reply(child) {
            Ok(reply) => replies.push(reply),
            Err(error) => {
                // Keep what was answered up to the first `Uncached`: it and the rest are
                // rendered again.
                let answered = replies
                    .into_iter()
                    .take_while(|reply| !matches!(reply, SandboxReply::Uncached))
                    .collect();
                return (taken, Err((error, outcomes_of(answered))));
            }
        }
    }
    // The whole batch is answered: a request sent again now gets the next reply line.
    for (reply, request) in replies.iter_mut().zip(&requests[..taken]) {
        if matches!(reply, SandboxReply::Uncached) {
            match resend_with_template(child, request) {
                Ok(SandboxReply::Uncached) => {
                    return (
                        taken,
                        Err((
                            io::Error::other(
                                "the render process asked again for a template it was sent",
                            ),
                            Vec::new(),
                        )),
                    )
                }
                Ok(again) => *reply = again,
                Err(error) => return (taken, Err((error, Vec::new()))),
            }
        }
    }
    // Only templates new to this child count towards forgetting: forgetting makes the next
    // batches send fields the child still holds.
    sending.retain(|digest| !child.sent.contains(*digest));
    if child.sent.len() + sending.len() > CACHED_TEMPLATES {
        child.sent.clear();
    }
    child.sent.extend(sending.into_iter().cloned());
    (taken, Ok(outcomes_of(replies)))
}

/// The outcomes of replies that are all `Rendered` or `Failed` (an `Uncached` reply is
/// resolved before; if one is left it reads as a failure).
fn outcomes_of(replies: Vec<SandboxReply>) -> Vec<RenderOutcome> {
    replies
        .into_iter()
        .map(|reply| match reply {
            SandboxReply::Rendered(message) => Ok(*message),
            SandboxReply::Failed(reason) => Err(reason),
            SandboxReply::Uncached => Err("the render process lost the template".to_owned()),
        })
        .collect()
}

/// A request as the worker writes it, with its template's fields or only their digest.
fn wire_request<'a>(request: &'a RenderRequest, with_template: bool) -> SandboxRequest<'a> {
    SandboxRequest {
        digest: request.template_digest.as_deref(),
        template: (with_template || request.template_digest.is_none())
            .then_some(&*request.template),
        account: &request.account,
        server: &request.server,
        recipient: &request.recipient,
        data: &request.data,
        links: &request.links,
    }
}

/// Sends one request again, alone and with its template's fields.
fn resend_with_template(
    child: &mut RenderChild,
    request: &RenderRequest,
) -> io::Result<SandboxReply> {
    child.input.write_all(b"[")?;
    serde_json::to_writer(&mut child.input, &wire_request(request, true))?;
    child.input.write_all(b"]\n")?;
    child.input.flush()?;
    read_reply(child)
}

fn read_reply(child: &mut RenderChild) -> io::Result<SandboxReply> {
    let mut line = String::new();
    if child.output.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the render process closed its output",
        ));
    }
    serde_json::from_str(&line).map_err(io::Error::other)
}

/// The child's side: checks that its address space is bounded, then renders requests
/// from standard input until it closes.
///
/// # Errors
/// When the bound is missing or a pipe fails.
pub fn serve_render_sandbox() -> io::Result<()> {
    check_address_space_bound()?;
    let stdin = io::stdin().lock();
    let mut stdout = BufWriter::with_capacity(REPLY_BUFFER, io::stdout().lock());
    let mut cache = TemplateCache::default();
    // One line is a batch, read whole before anything is written back: the worker never
    // waits to write while this child waits for it to read. One reply line per request,
    // flushed at the end of the batch.
    for line in stdin.lines() {
        let line = line?;
        match serde_json::from_str::<Vec<ChildRequest>>(&line) {
            Ok(batch) => {
                for request in batch {
                    let reply = render_in_child(&mut cache, request);
                    serde_json::to_writer(&mut stdout, &reply)?;
                    stdout.write_all(b"\n")?;
                }
            }
            Err(error) => {
                // The worker reads one reply per request it sent; it cannot count them in
                // an unreadable line, so answer once and let it see the child out of step.
                let reply = SandboxReply::Failed(format!("unreadable render batch: {error}"));
                serde_json::to_writer(&mut stdout, &reply)?;
                stdout.write_all(b"\n")?;
            }
        }
        stdout.flush()?;
    }
    Ok(())
}

fn render_in_child(cache: &mut TemplateCache, request: ChildRequest) -> SandboxReply {
    let cached = request
        .digest
        .as_deref()
        .and_then(|digest| cache.get(digest));
    let compiled = match (cached, request.template) {
        (Some(compiled), _) => compiled,
        (None, Some(template)) => {
            let compiled = Rc::new(CompiledTemplate::compile(&template));
            if let Some(digest) = request.digest {
                cache.insert(digest, Rc::clone(&compiled));
            }
            compiled
        }
        (None, None) => return SandboxReply::Uncached,
    };
    match compiled.render(
        &request.account,
        &request.server,
        &request.recipient,
        &request.data,
        &request.links,
    ) {
        Ok(message) => SandboxReply::Rendered(Box::new(message)),
        Err(error) => SandboxReply::Failed(error.to_string()),
    }
}

/// A render child's compiled templates by digest, least recently used evicted first,
/// bounded by [`CACHED_TEMPLATES`] and [`CACHED_TEMPLATE_BYTES`].
#[derive(Default)]
struct TemplateCache {
    entries: Vec<CachedTemplate>,
    bytes: usize,
    clock: u64,
}

struct CachedTemplate {
    digest: String,
    compiled: Rc<CompiledTemplate>,
    last_used: u64,
}

impl TemplateCache {
    fn get(&mut self, digest: &str) -> Option<Rc<CompiledTemplate>> {
        self.clock += 1;
        let entry = self
            .entries
            .iter_mut()
            .find(|entry| entry.digest == digest)?;
        entry.last_used = self.clock;
        Some(Rc::clone(&entry.compiled))
    }

    fn insert(&mut self, digest: String, compiled: Rc<CompiledTemplate>) {
        let size = compiled.source_bytes();
        if size > CACHED_TEMPLATE_BYTES {
            return;
        }
        while self.entries.len() >= CACHED_TEMPLATES || self.bytes + size > CACHED_TEMPLATE_BYTES {
            let Some(oldest) = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, entry)| entry.last_used)
                .map(|(index, _)| index)
            else {
                break;
            };
            let evicted = self.entries.swap_remove(oldest);
            self.bytes -= evicted.compiled.source_bytes();
        }
        self.clock += 1;
        self.bytes += size;
        self.entries.push(CachedTemplate {
            digest,
            compiled,
            last_used: self.clock,
        });
    }
}

/// Refuses to render without a bound on the address space (Linux: `/proc/self/limits`).
fn check_address_space_bound() -> io::Result<()> {
    let limits = std::fs::read_to_string("/proc/self/limits")?;
    let bounded = limits
        .lines()
        .find(|line| line.starts_with("Max address space"))
        .and_then(|line| line.split_whitespace().nth(3))
        .is_some_and(|soft| soft != "unlimited");
    if bounded {
        Ok(())
    } else {
        Err(io::Error::other(
            "the render sandbox must run under an address-space limit (ulimit -v)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(content: &str) -> TemplateFields {
        TemplateFields {
            subject: "Hi {{ email }}".into(),
            content: content.into(),
            text_content: None,
            from_name: None,
            from_email: Some("from@example.org".into()),
            cc: None,
            bcc: None,
            rcpt_name: None,
            reply_to: None,
            click_tracking: None,
            open_tracking: None,
        }
    }

    fn request(digest: Option<&str>, template: Option<TemplateFields>) -> ChildRequest {
        ChildRequest {
            digest: digest.map(str::to_owned),
            template,
            account: AccountDefaults {
                click_tracking: false,
                open_tracking: false,
            },
            server: ServerDefaults {
                default_from_email: "server@example.org".into(),
                default_from_name: String::new(),
            },
            recipient: Recipient {
                email: "to@example.org".into(),
                attributes: serde_json::Map::new(),
            },
            data: SendData::new(),
            links: MessageLinks::default(),
        }
    }

    fn html(reply: SandboxReply) -> String {
        match reply {
            SandboxReply::Rendered(message) => message.html,
            SandboxReply::Failed(reason) => panic!("failed: {reason}"),
            SandboxReply::Uncached => panic!("uncached"),
        }
    }

    #[test]
    fn a_child_renders_a_template_it_was_sent_once_from_its_digest() {
        let mut cache = TemplateCache::default();
        let first = fields("<p>{{ email }}</p>");
        let digest = first.digest();
        assert!(matches!(
            render_in_child(&mut cache, request(Some(&digest), None)),
            SandboxReply::Uncached
        ));
        let sent = html(render_in_child(
            &mut cache,
            request(Some(&digest), Some(first)),
        ));
        assert_eq!(sent, "<p>to@example.org</p>");
        let again = html(render_in_child(&mut cache, request(Some(&digest), None)));
        assert_eq!(again, sent);
        // An edited template has another digest: never the old compile.
        let edited = fields("<p>edited {{ email }}</p>");
        assert_ne!(edited.digest(), digest);
        assert!(matches!(
            render_in_child(&mut cache, request(Some(&edited.digest()), None)),
            SandboxReply::Uncached
        ));
        let edited_digest = edited.digest();
        assert_eq!(
            html(render_in_child(
                &mut cache,
                request(Some(&edited_digest), Some(edited))
            )),
            "<p>edited to@example.org</p>"
        );
        // Without a digest (a preview) it renders and keeps nothing.
        let before = cache.entries.len();
        let preview = html(render_in_child(
            &mut cache,
            request(None, Some(fields("<p>preview</p>"))),
        ));
        assert_eq!(preview, "<p>preview</p>");
        assert_eq!(cache.entries.len(), before);
    }

    #[test]
    fn the_cache_is_bounded_in_templates_and_bytes_least_recently_used_first() {
        let mut cache = TemplateCache::default();
        let mut first = None;
        let digests: Vec<String> = (0..=CACHED_TEMPLATES)
            .map(|n| {
                if n == CACHED_TEMPLATES {
                    let digest: &String = first.as_ref().expect("first digest");
                    html(render_in_child(&mut cache, request(Some(digest), None)));
                }
                let template = fields(&format!("<p>{n}</p>"));
                let digest = template.digest();
                html(render_in_child(
                    &mut cache,
                    request(Some(&digest), Some(template)),
                ));
                if n == 0 {
                    first = Some(digest.clone());
                }
                digest
            })
            .collect();
        // The first one used again before the last came in: the second one was then the
        // least recently used.
        assert_eq!(cache.entries.len(), CACHED_TEMPLATES);
        assert!(cache.get(&digests[0]).is_some());
        assert!(cache.get(&digests[1]).is_none(), "least recently used");
        assert!(cache.get(&digests[CACHED_TEMPLATES]).is_some());

        // A template larger than the byte bound is rendered and not kept; large ones
        // evict others to stay within the bound.
        let huge = fields(&"x".repeat(CACHED_TEMPLATE_BYTES + 1));
        let huge_digest = huge.digest();
        html(render_in_child(
            &mut cache,
            request(Some(&huge_digest), Some(huge)),
        ));
        assert!(cache.get(&huge_digest).is_none());
        for n in 0..3 {
            let large = fields(&format!("{n}{}", "y".repeat(CACHED_TEMPLATE_BYTES / 2)));
            let digest = large.digest();
            html(render_in_child(
                &mut cache,
                request(Some(&digest), Some(large)),
            ));
            assert!(cache.bytes <= CACHED_TEMPLATE_BYTES, "{}", cache.bytes);
        }
        assert_eq!(
            cache.bytes,
            cache
                .entries
                .iter()
                .map(|entry| entry.compiled.source_bytes())
                .sum::<usize>()
        );
    }
}
