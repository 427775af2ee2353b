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
//! (docs/operations.md, "Delivery engine"). The child runs with an empty environment:
//! it needs no secret and gets none.
//!
//! Fuel does not bound time either: one instruction may build or scan a string of tens of
//! megabytes. So each request has a deadline ([`RENDER_DEADLINE`] for deliveries,
//! [`PREVIEW_RENDER_DEADLINE`] for previews), counted from the reply before it: the child
//! flushes each reply as it is ready, a thread per child reads them (each line bounded by
//! [`MAX_REPLY_BYTES`]), and a request whose reply does not come in time has its child
//! killed and fails with a reason about time, alone; its template's other requests of the
//! same call fail with that reason unrendered (docs/operations.md, "Render deadlines").
//! `RLIMIT_CPU` ([`SANDBOX_CPU_SECONDS`]) is the backstop, checked by the child like the
//! address-space bound.
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
    collections::{HashSet, VecDeque},
    io::{self, BufRead, BufReader, BufWriter, Read, Write},
    path::PathBuf,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        mpsc::{self, Receiver, RecvTimeoutError, SyncSender},
        Arc, Mutex, MutexGuard, TryLockError,
    },
    time::{Duration, Instant},
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

/// The CPU time one render child may use over its life (`RLIMIT_CPU`, `ulimit -t`): a
/// backstop behind the deadline of each request ([`RENDER_DEADLINE`]), for a child the
/// worker stopped watching. The worker replaces a child once it has been busy for half
/// of this ([`RETIRE_AFTER_BUSY`]), so a child that renders ordinary mail for days never
/// reaches it mid-render.
pub const SANDBOX_CPU_SECONDS: u64 = 120;

/// A render child that has spent this long rendering (its CPU time is at most that) is
/// replaced by a fresh one before its next batch.
const RETIRE_AFTER_BUSY: Duration = Duration::from_secs(SANDBOX_CPU_SECONDS / 2);

/// How long one render request of a worker may take, from the moment its child could
/// start on it (the reply before it, or the batch's write) to its reply. Fuel bounds a
/// template's instructions, not what each costs: `"x" * 50000000` is one instruction and
/// a tenth of a second of CPU, and filters and `~` on such strings are linear in them. A
/// request past this deadline has its child killed and fails with a reason about time.
pub const RENDER_DEADLINE: Duration = Duration::from_secs(5);

/// The same for a template preview (`POST …/templates/{templateId}/preview` and the
/// console's editor), which a person waits for.
pub const PREVIEW_RENDER_DEADLINE: Duration = Duration::from_secs(2);

/// Render children kept for previews: more than the previews one account may run at once
/// (`mailroom_app::templates::MAX_PREVIEWS_PER_ACCOUNT`), so a preview of one account
/// finds an idle child while another account's slow previews hold theirs.
pub const PREVIEW_CHILDREN: usize = 4;

/// The longest reply line a child writes: a reply whose encoding would be longer
/// (control characters escape to six bytes each) is answered as a failure by the child
/// itself, and a child that writes a longer line anyway is killed. The rendered message
/// itself is bounded by [`mailroom_app::rendering::MAX_MESSAGE_BYTES`].
pub const MAX_REPLY_BYTES: usize = 4 * 1024 * 1024;

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

    /// The renderer for previews: children of their own ([`PREVIEW_CHILDREN`]), each
    /// request bounded by [`PREVIEW_RENDER_DEADLINE`].
    pub fn for_previews(program: Option<PathBuf>) -> Self {
        match program {
            Some(program) => Self::Sandboxed(Arc::new(
                RenderSandbox::new(program, PREVIEW_CHILDREN)
                    .with_deadline(PREVIEW_RENDER_DEADLINE),
            )),
            None => Self::InProcess,
        }
    }

    /// Renders each job, in order, until the rendered messages take more than `budget`
    /// bytes: the jobs after the one that passed it are [`Rendered::Deferred`].
    pub fn render_within(&self, jobs: &[RenderJob], budget: usize) -> Vec<Rendered> {
        match self {
            Self::InProcess => {
                let mut used = 0;
                jobs.iter()
                    .map(|job| {
                        if used > budget {
                            return Rendered::Deferred;
                        }
                        let outcome = render_in_process(job);
                        if let Ok(message) = &outcome {
                            used += message.size();
                        }
                        Rendered::Done(outcome)
                    })
                    .collect()
            }
            Self::Sandboxed(sandbox) => {
                let requests: Vec<&RenderRequest> = jobs.iter().map(|job| &job.request).collect();
                sandbox.render_within(&requests, budget)
            }
        }
    }
}

/// How one render request of a claim ended.
// As large as the `Option<RenderOutcome>` it replaced; boxing would add an allocation
// per message for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Rendered {
    /// Rendered, or failed for a reason of its own.
    Done(RenderOutcome),
    /// No render child could be started: the message stays claimed and is retried after
    /// its lease, like a crash.
    NoRenderer,
    /// Not rendered: the messages rendered before it took the claim's budget of bytes.
    /// The message goes back to the queue, due at once, with no attempt spent.
    Deferred,
}

impl Rendered {
    /// The outcome, `None` unless rendered or failed.
    pub fn outcome(self) -> Option<RenderOutcome> {
        match self {
            Self::Done(outcome) => Some(outcome),
            Self::NoRenderer | Self::Deferred => None,
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

/// The buffer on each side of a child's replies: a pipe's capacity on Linux, so one
/// reply (about 5 KB) is one write of the child and one read of the worker.
const REPLY_BUFFER: usize = 64 * 1024;

/// Replies read ahead of the worker by a child's reader thread: with
/// [`MAX_REPLY_BYTES`], what a child can make the worker hold beyond the replies it took.
const REPLIES_READ_AHEAD: usize = 2;

/// A small pool of render children, each used by one batch at a time.
pub struct RenderSandbox {
    program: PathBuf,
    children: Vec<Mutex<Option<RenderChild>>>,
    next: AtomicUsize,
    deadline: Duration,
}

struct RenderChild {
    process: Child,
    input: BufWriter<ChildStdin>,
    /// The child's reply lines, read and decoded by a thread of their own (so a reply can
    /// be waited for with a deadline), each bounded by [`MAX_REPLY_BYTES`].
    replies: Receiver<Result<SandboxReply, Stop>>,
    /// The digests of the templates this child was sent, so most likely holds compiled
    /// (it may have evicted some: it then answers `Uncached`). Forgotten past
    /// [`CACHED_TEMPLATES`], which only costs sending those templates again.
    sent: HashSet<Arc<str>>,
    /// How long this child has spent on batches: an upper bound of its CPU time.
    busy: Duration,
}

impl Drop for RenderChild {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// Why the exchange with a child stopped before every reply was read.
#[derive(Debug)]
enum Stop {
    /// The child died, closed a pipe or answered out of step.
    Died(io::Error),
    /// The request being rendered ran past the deadline.
    TimedOut,
    /// The child wrote a reply line longer than [`MAX_REPLY_BYTES`].
    TooLarge,
    /// The replies read took the budget of bytes; the child is still rendering the rest.
    OverBudget,
}

impl Stop {
    fn died(message: &str) -> Self {
        Self::Died(io::Error::other(message.to_owned()))
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Died(error) => write!(f, "{error}"),
            Self::TimedOut => f.write_str("a render ran past its deadline"),
            Self::TooLarge => f.write_str("a reply was longer than the bound"),
            Self::OverBudget => f.write_str("the replies took the claim's budget of bytes"),
        }
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
    /// The child was killed because the request at `culprit` (in the batch) ran past the
    /// deadline or answered too much; `answered` are the outcomes before it that stand.
    Stopped {
        answered: Vec<RenderOutcome>,
        culprit: usize,
        reason: Culprit,
    },
    /// The replies read took the budget of bytes: `answered` stand, the rest of the
    /// batch is deferred (the child, still rendering it, was killed).
    OverBudget { answered: Vec<RenderOutcome> },
    /// No child could be started.
    NoChild,
}

/// What the request that stopped a child did.
#[derive(Clone, Copy)]
enum Culprit {
    TimedOut,
    TooLarge,
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
    /// use, each request bounded by [`RENDER_DEADLINE`].
    pub fn new(program: PathBuf, size: usize) -> Self {
        Self {
            program,
            children: (0..size.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            deadline: RENDER_DEADLINE,
        }
    }

    /// The same pool with another deadline per request.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Renders one request (a batch of one).
    fn render(&self, request: &RenderRequest) -> Option<RenderOutcome> {
        self.render_all(&[request]).pop().flatten()
    }

    /// [`Self::render_within`] without a budget of bytes: `None` for a request no child
    /// could be started for.
    pub fn render_all(&self, requests: &[&RenderRequest]) -> Vec<Option<RenderOutcome>> {
        self.render_within(requests, usize::MAX)
            .into_iter()
            .map(Rendered::outcome)
            .collect()
    }

    /// Why a request ran out of time.
    fn too_slow(&self) -> String {
        format!(
            "rendering stopped: the template took longer than {} s to render",
            self.deadline.as_secs_f64()
        )
    }

    /// Renders the requests in batches: one write of up to [`BATCH_REQUESTS`] requests
    /// and one read of their replies, where one round trip per request used to wake the
    /// worker and the child for each message. A child that dies within a batch of several
    /// leaves its unanswered requests to be rendered one batch of one each, on fresh
    /// children, so the request that kills a child is the only one failed for it.
    ///
    /// A request that runs past the deadline fails with a reason about time (its child is
    /// killed; the rest of its batch goes to a fresh child), and the other requests of
    /// these `requests` with the same template fail with the same reason without being
    /// rendered: one template's slowness costs one deadline per call (per claim), not
    /// one per message.
    ///
    /// Once the rendered messages read take more than `budget` bytes, the requests left
    /// are [`Rendered::Deferred`] (a child still rendering them is killed), so what one
    /// claim holds is bounded by the budget and one message.
    pub fn render_within(&self, requests: &[&RenderRequest], budget: usize) -> Vec<Rendered> {
        let mut outcomes: Vec<Option<Option<RenderOutcome>>> = vec![None; requests.len()];
        let mut pending: VecDeque<usize> = (0..requests.len()).collect();
        // The templates (by digest) that ran past the deadline in this call.
        let mut slow: HashSet<Arc<str>> = HashSet::new();
        let mut used = 0usize;
        let size = |outcome: &RenderOutcome| outcome.as_ref().map_or(0, RenderedMessage::size);
        while !pending.is_empty() && used <= budget {
            let mut batch: Vec<usize> = Vec::new();
            while batch.len() < BATCH_REQUESTS {
                let Some(index) = pending.pop_front() else {
                    break;
                };
                if self.is_slow(requests[index], &slow) {
                    outcomes[index] = Some(Some(Err(self.slow_sibling())));
                } else {
                    batch.push(index);
                }
            }
            if batch.is_empty() {
                continue;
            }
            let refs: Vec<&RenderRequest> = batch.iter().map(|&index| requests[index]).collect();
            let (taken, end) = self.render_batch(&refs, budget - used);
            for &index in batch[taken..].iter().rev() {
                pending.push_front(index);
            }
            let batch = &batch[..taken];
            match end {
                BatchEnd::Answered(answered) => {
                    for (&index, outcome) in batch.iter().zip(answered) {
                        used = used.saturating_add(size(&outcome));
                        outcomes[index] = Some(Some(outcome));
                    }
                }
                BatchEnd::OverBudget { answered } => {
                    for (&index, outcome) in batch.iter().zip(answered) {
                        used = used.saturating_add(size(&outcome));
                        outcomes[index] = Some(Some(outcome));
                    }
                    // Past the budget: the rest of the batch and of the call are deferred.
                    used = used.max(budget.saturating_add(1));
                }
                BatchEnd::NoChild => {
                    for &index in batch {
                        outcomes[index] = Some(None);
                    }
                }
                BatchEnd::Died { answered, status } => {
                    let count = answered.len();
                    for (&index, outcome) in batch.iter().zip(answered) {
                        outcomes[index] = Some(Some(outcome));
                    }
                    if taken == 1 {
                        // The request alone killed its child.
                        outcomes[batch[0]] = Some(Some(Err(ended(&status))));
                    } else {
                        for &index in &batch[count..] {
                            outcomes[index] = Some(self.render_alone(requests[index], &mut slow));
                        }
                    }
                }
                BatchEnd::Stopped {
                    answered,
                    culprit,
                    reason,
                } => {
                    let count = answered.len();
                    for (&index, outcome) in batch.iter().zip(answered) {
                        outcomes[index] = Some(Some(outcome));
                    }
                    outcomes[batch[culprit]] = Some(Some(Err(self.blame(
                        requests[batch[culprit]],
                        reason,
                        &mut slow,
                    ))));
                    // The rest of the batch goes to a fresh child, in order.
                    for (position, &index) in batch.iter().enumerate().skip(count).rev() {
                        if position != culprit {
                            pending.push_front(index);
                        }
                    }
                }
            }
        }
        outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Some(Some(outcome)) => Rendered::Done(outcome),
                Some(None) => Rendered::NoRenderer,
                None => Rendered::Deferred,
            })
            .collect()
    }

    /// Renders one request in a batch of its own.
    fn render_alone(
        &self,
        request: &RenderRequest,
        slow: &mut HashSet<Arc<str>>,
    ) -> Option<RenderOutcome> {
        if self.is_slow(request, slow) {
            return Some(Err(self.slow_sibling()));
        }
        match self.render_batch(&[request], usize::MAX).1 {
            BatchEnd::Answered(mut answered) | BatchEnd::OverBudget { mut answered } => {
                answered.pop()
            }
            BatchEnd::NoChild => None,
            BatchEnd::Died {
                mut answered,
                status,
            } => Some(answered.pop().unwrap_or_else(|| Err(ended(&status)))),
            BatchEnd::Stopped { reason, .. } => Some(Err(self.blame(request, reason, slow))),
        }
    }

    fn is_slow(&self, request: &RenderRequest, slow: &HashSet<Arc<str>>) -> bool {
        request
            .template_digest
            .as_ref()
            .is_some_and(|digest| slow.contains(digest))
    }

    /// The failure of the request that stopped its child; a slow template is remembered.
    fn blame(
        &self,
        request: &RenderRequest,
        reason: Culprit,
        slow: &mut HashSet<Arc<str>>,
    ) -> String {
        match reason {
            Culprit::TimedOut => {
                if let Some(digest) = &request.template_digest {
                    slow.insert(Arc::clone(digest));
                }
                self.too_slow()
            }
            Culprit::TooLarge => format!(
                "rendering stopped: the rendered message is too large (its reply passed {} MiB)",
                MAX_REPLY_BYTES / (1024 * 1024)
            ),
        }
    }

    fn slow_sibling(&self) -> String {
        format!(
            "{} for another message of the same template and claim; not rendered again",
            self.too_slow()
        )
    }

    /// An idle child's slot, else (every child busy) the next one in turn, waited for.
    fn take_child(&self) -> MutexGuard<'_, Option<RenderChild>> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let count = self.children.len();
        for offset in 0..count {
            match self.children[(start + offset) % count].try_lock() {
                Ok(guard) => return guard,
                Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {}
            }
        }
        self.children[start % count]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends one batch from the front of `requests` to a child and reads its replies:
    /// how many requests the batch took, and how it ended.
    fn render_batch(&self, requests: &[&RenderRequest], budget: usize) -> (usize, BatchEnd) {
        let mut child = self.take_child();
        if child
            .as_ref()
            .is_some_and(|running| running.busy > RETIRE_AFTER_BUSY)
        {
            // Replaced before its CPU limit could end it in the middle of a render.
            *child = None;
        }
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
        let started = Instant::now();
        let (taken, result) = exchange_batch(running, requests, self.deadline, budget);
        running.busy += started.elapsed();
        match result {
            Ok(answered) => (taken, BatchEnd::Answered(answered)),
            Err(failure) => {
                // Killed first: a child that answered out of step or is still rendering is
                // running, and waiting for it would hang this thread. A child that died
                // keeps the status it died with.
                let status = child.take().map_or_else(String::new, |mut gone| {
                    let _ = gone.process.kill();
                    gone.process
                        .wait()
                        .map_or_else(|e| e.to_string(), |s| s.to_string())
                });
                let answered = failure.answered;
                tracing::warn!(error = %failure.stop, %status, answered = answered.len(), taken, "a render process stopped; starting a fresh one");
                let end = match (failure.stop, failure.culprit) {
                    (Stop::OverBudget, _) => BatchEnd::OverBudget { answered },
                    (Stop::TimedOut, Some(culprit)) => BatchEnd::Stopped {
                        answered,
                        culprit,
                        reason: Culprit::TimedOut,
                    },
                    (Stop::TooLarge, Some(culprit)) => BatchEnd::Stopped {
                        answered,
                        culprit,
                        reason: Culprit::TooLarge,
                    },
                    _ => BatchEnd::Died { answered, status },
                };
                (taken, end)
            }
        }
    }

    fn spawn(&self) -> io::Result<RenderChild> {
        // `ulimit -v` (KiB) sets RLIMIT_AS for the shell, which `exec` hands to the child;
        // `ulimit -t` (seconds) RLIMIT_CPU.
        let mut process = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v {} && ulimit -t {SANDBOX_CPU_SECONDS} && exec \"$0\" {SANDBOX_SUBCOMMAND}",
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
        let (sender, replies) = mpsc::sync_channel(REPLIES_READ_AHEAD);
        std::thread::Builder::new()
            .name("render-replies".to_owned())
            .spawn(move || read_replies(output, &sender))?;
        Ok(RenderChild {
            process,
            input: BufWriter::new(input),
            replies,
            sent: HashSet::new(),
            busy: Duration::ZERO,
        })
    }
}

/// The reason of a request that ended its child alone.
fn ended(status: &str) -> String {
    format!(
        "rendering stopped: the render process ended ({status}); the template most likely \
         needs more than the {} MiB a render may use",
        SANDBOX_ADDRESS_SPACE / (1024 * 1024)
    )
}

/// A child's reader thread: decodes each reply line, bounded by [`MAX_REPLY_BYTES`],
/// until the output closes, a line is too long or the worker stops listening.
fn read_replies(output: ChildStdout, sender: &SyncSender<Result<SandboxReply, Stop>>) {
    let mut reader = BufReader::with_capacity(REPLY_BUFFER, output);
    loop {
        let mut line = Vec::new();
        let limit = u64::try_from(MAX_REPLY_BYTES).unwrap_or(u64::MAX) + 1;
        let read = (&mut reader).take(limit).read_until(b'\n', &mut line);
        let reply = match read {
            Ok(0) => Err(Stop::died("the render process closed its output")),
            Ok(_) if line.last() == Some(&b'\n') => {
                serde_json::from_slice(&line).map_err(|error| Stop::Died(io::Error::other(error)))
            }
            Ok(_) if line.len() > MAX_REPLY_BYTES => Err(Stop::TooLarge),
            Ok(_) => Err(Stop::died("the render process closed its output mid-line")),
            Err(error) => Err(Stop::Died(error)),
        };
        let last = reply.is_err();
        if sender.send(reply).is_err() || last {
            return;
        }
    }
}

/// How an exchange with a child failed: why, the outcomes read before it that stand,
/// and the request (by position in the batch) that stopped it, when one did.
struct Failure {
    stop: Stop,
    answered: Vec<RenderOutcome>,
    culprit: Option<usize>,
}

impl Failure {
    fn died(error: io::Error) -> Self {
        Self {
            stop: Stop::Died(error),
            answered: Vec::new(),
            culprit: None,
        }
    }
}

/// Writes one batch (one line: a JSON array of requests, a template's fields sent only
/// the first time this child gets them) and reads one reply line per request, each within
/// `deadline` of the one before, stopping once the rendered messages read take more than
/// `budget` bytes; then each request the child answered `Uncached` (it evicted the
/// template) goes again alone, with the fields. Returns how many requests the batch took,
/// and their outcomes, or how it failed.
fn exchange_batch(
    child: &mut RenderChild,
    requests: &[&RenderRequest],
    deadline: Duration,
    budget: usize,
) -> (usize, Result<Vec<RenderOutcome>, Failure>) {
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
            return (taken, Err(Failure::died(io::Error::other(error))));
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
        return (taken, Err(Failure::died(error)));
    }
    let mut replies = Vec::with_capacity(taken);
    let mut used = 0usize;
    for _ in 0..taken {
        if used > budget {
            let answered = replies
                .into_iter()
                .take_while(|reply| !matches!(reply, SandboxReply::Uncached))
                .collect();
            return (
                taken,
                Err(Failure {
                    stop: Stop::OverBudget,
                    answered: outcomes_of(answered),
                    culprit: None,
                }),
            );
        }
        match read_reply(child, deadline) {
            Ok(reply) => {
                if let SandboxReply::Rendered(message) = &reply {
                    used = used.saturating_add(message.size());
                }
                replies.push(reply);
            }
            Err(stop) => {
                // The request being rendered is the first unanswered one. Keep what was
                // answered up to the first `Uncached`: it and the rest are rendered again.
                let culprit = Some(replies.len());
                let answered = replies
                    .into_iter()
                    .take_while(|reply| !matches!(reply, SandboxReply::Uncached))
                    .collect();
                let answered = outcomes_of(answered);
                return (
                    taken,
                    Err(Failure {
                        stop,
                        answered,
                        culprit,
                    }),
                );
            }
        }
    }
    // The whole batch is answered: a request sent again now gets the next reply line.
    for position in 0..taken {
        if !matches!(replies[position], SandboxReply::Uncached) {
            continue;
        }
        match resend_with_template(child, requests[position], deadline) {
            Ok(SandboxReply::Uncached) => {
                return (
                    taken,
                    Err(Failure::died(io::Error::other(
                        "the render process asked again for a template it was sent",
                    ))),
                )
            }
            Ok(again) => replies[position] = again,
            Err(stop) => {
                // Every reply before this one is resolved.
                replies.truncate(position);
                return (
                    taken,
                    Err(Failure {
                        stop,
                        answered: outcomes_of(replies),
                        culprit: Some(position),
                    }),
                );
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
    deadline: Duration,
) -> Result<SandboxReply, Stop> {
    let write = |child: &mut RenderChild| -> io::Result<()> {
        child.input.write_all(b"[")?;
        serde_json::to_writer(&mut child.input, &wire_request(request, true))?;
        child.input.write_all(b"]\n")?;
        child.input.flush()
    };
    write(child).map_err(Stop::Died)?;
    read_reply(child, deadline)
}

/// The next reply, waited for at most `deadline`.
fn read_reply(child: &mut RenderChild, deadline: Duration) -> Result<SandboxReply, Stop> {
    match child.replies.recv_timeout(deadline) {
        Ok(reply) => reply,
        Err(RecvTimeoutError::Timeout) => Err(Stop::TimedOut),
        Err(RecvTimeoutError::Disconnected) => {
            Err(Stop::died("the render process closed its output"))
        }
    }
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
                    let reply = encoded_reply(&render_in_child(&mut cache, request))?;
                    stdout.write_all(&reply)?;
                    // Each reply as soon as it is ready: the worker times every request
                    // from the reply before it.
                    stdout.flush()?;
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

/// One reply line; a reply longer than [`MAX_REPLY_BYTES`] is answered as a failure.
fn encoded_reply(reply: &SandboxReply) -> io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(reply)?;
    if line.len() >= MAX_REPLY_BYTES {
        line = serde_json::to_vec(&SandboxReply::Failed(format!(
            "the rendered message is too large: {} bytes once encoded, more than {} MiB",
            line.len(),
            MAX_REPLY_BYTES / (1024 * 1024)
        )))?;
    }
    line.push(b'\n');
    Ok(line)
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

/// Refuses to render without a bound on the address space and on CPU time (Linux:
/// `/proc/self/limits`).
fn check_address_space_bound() -> io::Result<()> {
    let limits = std::fs::read_to_string("/proc/self/limits")?;
    // "Max address space  <soft> <hard> bytes", "Max cpu time  <soft> <hard> seconds".
    let bounded = |name: &str, soft_at: usize| {
        limits
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().nth(soft_at))
            .is_some_and(|soft| soft != "unlimited")
    };
    if !bounded("Max address space", 3) {
        return Err(io::Error::other(
            "the render sandbox must run under an address-space limit (ulimit -v)",
        ));
    }
    if !bounded("Max cpu time", 3) {
        return Err(io::Error::other(
            "the render sandbox must run under a CPU-time limit (ulimit -t)",
        ));
    }
    Ok(())
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
        // (Their bulk is never rendered: a message renders to at most 2 MiB.)
        let huge = fields(&format!(
            "{{% if false %}}{}{{% endif %}}",
            "x".repeat(CACHED_TEMPLATE_BYTES + 1)
        ));
        let huge_digest = huge.digest();
        html(render_in_child(
            &mut cache,
            request(Some(&huge_digest), Some(huge)),
        ));
        assert!(cache.get(&huge_digest).is_none());
        for n in 0..3 {
            let large = fields(&format!(
                "{n}{{% if false %}}{}{{% endif %}}",
                "y".repeat(CACHED_TEMPLATE_BYTES / 2)
            ));
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
