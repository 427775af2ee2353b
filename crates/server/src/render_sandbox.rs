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
//! `/proc/self/limits` and refuses to run without it), rendering requests one at a time,
//! one JSON line in and one out, over its standard input and output. A render that exceeds the bound makes the
//! child's allocation fail and the child abort; the worker sees the pipe close, fails that
//! one message with the reason, and starts a fresh child for the next render. The child
//! runs with an empty environment: it needs no secret and gets none.

use std::{
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
    rendering::{RenderRequest, RenderedMessage},
};
use serde::{Deserialize, Serialize};

/// The address space one render child may map: the binary and its libraries take a few
/// tens of MiB of it, the rest bounds what one render can allocate.
pub const SANDBOX_ADDRESS_SPACE: u64 = 512 * 1024 * 1024;

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

    /// Renders one job; `None` when no render child could be started (the message stays
    /// claimed and is retried after its lease, like a crash).
    pub fn render(&self, job: &RenderJob) -> Option<RenderOutcome> {
        match self {
            Self::InProcess => Some(render_in_process(job)),
            Self::Sandboxed(sandbox) => sandbox.render(&job.request),
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

/// A small pool of render children, each used by one render at a time.
pub struct RenderSandbox {
    program: PathBuf,
    children: Vec<Mutex<Option<RenderChild>>>,
    next: AtomicUsize,
}

struct RenderChild {
    process: Child,
    input: BufWriter<ChildStdin>,
    output: BufReader<ChildStdout>,
}

impl Drop for RenderChild {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// One render's answer on the child's standard output.
#[derive(Serialize, Deserialize)]
enum SandboxReply {
    Rendered(Box<RenderedMessage>),
    Failed(String),
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

    fn render(&self, request: &RenderRequest) -> Option<RenderOutcome> {
        let slot = self.next.fetch_add(1, Ordering::Relaxed) % self.children.len();
        let mut child = self.children[slot]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if child.is_none() {
            match self.spawn() {
                Ok(started) => *child = Some(started),
                Err(error) => {
                    tracing::error!(%error, program = %self.program.display(), "the render process cannot start");
                    return None;
                }
            }
        }
        let running = child.as_mut()?;
        match exchange(running, request) {
            Ok(SandboxReply::Rendered(message)) => Some(Ok(*message)),
            Ok(SandboxReply::Failed(reason)) => Some(Err(reason)),
            Err(error) => {
                let mut gone = child.take()?;
                let status = gone
                    .process
                    .wait()
                    .map_or_else(|e| e.to_string(), |s| s.to_string());
                tracing::warn!(%error, %status, "a render process stopped; starting a fresh one for the next render");
                Some(Err(format!(
                    "rendering stopped: the render process ended ({status}); the template \
                     most likely needs more than the {} MiB a render may use",
                    SANDBOX_ADDRESS_SPACE / (1024 * 1024)
                )))
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
            output: BufReader::new(output),
        })
    }
}

fn exchange(child: &mut RenderChild, request: &RenderRequest) -> io::Result<SandboxReply> {
    serde_json::to_writer(&mut child.input, request)?;
    child.input.write_all(b"\n")?;
    child.input.flush()?;
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
    let mut stdout = BufWriter::new(io::stdout().lock());
    for line in stdin.lines() {
        let line = line?;
        let reply = match serde_json::from_str::<RenderRequest>(&line) {
            Ok(request) => match request.render() {
                Ok(message) => SandboxReply::Rendered(Box::new(message)),
                Err(error) => SandboxReply::Failed(error.to_string()),
            },
            Err(error) => SandboxReply::Failed(format!("unreadable render request: {error}")),
        };
        serde_json::to_writer(&mut stdout, &reply)?;
        stdout.write_all(b"\n")?;
        stdout.flush()?;
    }
    Ok(())
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
