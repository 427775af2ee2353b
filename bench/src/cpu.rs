//! CPU time read from `/proc`: of a process, of this process's threads by name, and of
//! the PostgreSQL server's processes, so a benchmark can say who spent the cores.

use std::{process::Command, time::Duration};

/// The name the benchmark runtime gives its threads (`main.rs`): the load generator's
/// side of an in-process run. Every other thread of the process is the server's (actix
/// workers, their blocking pools, r2d2).
pub const LOAD_THREAD_NAME: &str = "bench-load";

pub struct ProcessCpu {
    /// utime + stime.
    pub own: Duration,
    /// cutime + cstime: children that ended and were waited for.
    pub waited_children: Duration,
}

/// The CPU time of process (or thread) `pid`.
pub fn process_cpu(pid: u32) -> Option<ProcessCpu> {
    stat_cpu(&format!("/proc/{pid}/stat")).map(|(_, cpu)| cpu)
}

/// The CPU time (user + system) of the calling thread.
pub fn this_thread_cpu() -> Option<Duration> {
    stat_cpu("/proc/thread-self/stat").map(|(_, cpu)| cpu.own)
}

/// The command name and CPU time in the `stat` file at `path`.
fn stat_cpu(path: &str) -> Option<(String, ProcessCpu)> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the command name (which may hold spaces) start at `state`.
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(').map(|(_, name)| name.to_owned())?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks =
        |index: usize| -> u64 { fields.get(index).and_then(|f| f.parse().ok()).unwrap_or(0) };
    // utime, stime, cutime, cstime are fields 14 to 17 of stat, 12 to 15 after `)`.
    let seconds = |ticks: u64| Duration::from_secs_f64(ticks as f64 / clock_ticks());
    Some((
        name,
        ProcessCpu {
            own: seconds(ticks(11) + ticks(12)),
            waited_children: seconds(ticks(13) + ticks(14)),
        },
    ))
}

fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|output| String::from_utf8(output.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// The machine's CPU time so far, all cores together: busy (everything but idle and
/// waiting for I/O) and in all, from the first line of `/proc/stat`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MachineCpu {
    pub busy: Duration,
    pub total: Duration,
}

impl MachineCpu {
    /// Reads the counters now (zero where `/proc/stat` cannot be read).
    pub fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let Some(line) = stat.lines().find(|line| line.starts_with("cpu ")) else {
            return Self::default();
        };
        let ticks: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|field| field.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let all: u64 = ticks.iter().take(8).sum();
        let resting = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
        let seconds = |ticks: u64| Duration::from_secs_f64(ticks as f64 / clock_ticks());
        Self {
            busy: seconds(all.saturating_sub(resting)),
            total: seconds(all),
        }
    }

    /// What was spent between `before` and `self`.
    pub fn since(self, before: Self) -> Self {
        Self {
            busy: self.busy.saturating_sub(before.busy),
            total: self.total.saturating_sub(before.total),
        }
    }
}

/// CPU time spent so far by each side of a run on this machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuSplit {
    /// This process's threads but the load generator's: the in-process server.
    pub server: Duration,
    /// The load generator's threads ([`LOAD_THREAD_NAME`]).
    pub load: Duration,
    /// Child processes this one waited for (pgbench).
    pub waited_children: Duration,
    /// Every process named `postgres`: the server and its live backends, and the
    /// backends that ended (the server waited for them, so they are in its children's
    /// time).
    pub postgres: Duration,
}

impl CpuSplit {
    /// Reads the counters now.
    pub fn now() -> Self {
        let mut split = Self::default();
        if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
            for task in tasks.flatten() {
                let path = format!("{}/stat", task.path().display());
                if let Some((name, cpu)) = stat_cpu(&path) {
                    if name.starts_with(LOAD_THREAD_NAME) {
                        split.load += cpu.own;
                    } else {
                        split.server += cpu.own;
                    }
                }
            }
        }
        if let Some((_, cpu)) = stat_cpu("/proc/self/stat") {
            split.waited_children = cpu.waited_children;
        }
        if let Ok(processes) = std::fs::read_dir("/proc") {
            for process in processes.flatten() {
                let path = format!("{}/stat", process.path().display());
                if let Some((name, cpu)) = stat_cpu(&path) {
                    if name == "postgres" {
                        split.postgres += cpu.own + cpu.waited_children;
                    }
                }
            }
        }
        split
    }

    /// What was spent between `before` and `self`.
    pub fn since(self, before: Self) -> Self {
        Self {
            server: self.server.saturating_sub(before.server),
            load: self.load.saturating_sub(before.load),
            waited_children: self.waited_children.saturating_sub(before.waited_children),
            postgres: self.postgres.saturating_sub(before.postgres),
        }
    }
}
