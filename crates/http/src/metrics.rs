//! Prometheus metrics of the HTTP layer and the connection pool, and the outboxes as the
//! database sees them at scrape time. The server hands in further registries to expose
//! with them (the workers' delivery counters, `mailroom_server::metrics`).

use std::{sync::Arc, time::Duration};

use mailroom_app::ports::QueueStats;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// Whether a listener serves `/metrics`: the public API does not when the process has a
/// separate metrics listener (`MAILROOM_METRICS_LISTEN`), and answers 404 there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsExposure(pub bool);

/// Reports (connections open, connections idle) of the database pool.
pub type PoolStateFn = Arc<dyn Fn() -> (u32, u32) + Send + Sync>;

/// The registry and the series the HTTP layer writes.
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    pool_connections: IntGauge,
    pool_idle: IntGauge,
    pool_state: PoolStateFn,
    queue: QueueGauges,
    /// Registries the server owns, gathered with this one.
    gathered: Vec<Registry>,
}

/// The gauges filled from a [`QueueStats`] snapshot at scrape time.
struct QueueGauges {
    depth: IntGaugeVec,
    due: IntGaugeVec,
    oldest_due_age: GaugeVec,
    messages: IntGaugeVec,
    messages_exact: IntGauge,
    /// No labels; a vector only so a failed scrape can drop the sample.
    unhealthy_mail_servers: IntGaugeVec,
    up: IntGauge,
}

impl QueueGauges {
    fn new(registry: &Registry) -> Self {
        let gauges = Self {
            depth: IntGaugeVec::new(
                Opts::new(
                    "queue_depth",
                    "Rows a worker will still handle, by outbox (queued and in-flight, due or not).",
                ),
                &["queue"],
            )
            .expect("valid metric"),
            due: IntGaugeVec::new(
                Opts::new(
                    "queue_due",
                    "Rows due now and not leased by a worker, by outbox.",
                ),
                &["queue"],
            )
            .expect("valid metric"),
            oldest_due_age: GaugeVec::new(
                Opts::new(
                    "queue_oldest_due_age_seconds",
                    "Seconds since the oldest row waiting for a worker became due, by outbox (0 when none waits).",
                ),
                &["queue"],
            )
            .expect("valid metric"),
            messages: IntGaugeVec::new(
                Opts::new("messages", "Messages by status (all accounts)."),
                &["status"],
            )
            .expect("valid metric"),
            messages_exact: IntGauge::new(
                "messages_counts_exact",
                "1 when mailroom_messages was counted, 0 when its final statuses were estimated from planner statistics (large tables).",
            )
            .expect("valid metric"),
            unhealthy_mail_servers: IntGaugeVec::new(
                Opts::new(
                    "mail_servers_unhealthy",
                    "Mail servers that refused Mailroom itself (for example AUTH answered 535): their messages wait until the server is fixed or its settings saved.",
                ),
                &[],
            )
            .expect("valid metric"),
            up: IntGauge::new(
                "queue_stats_up",
                "1 when the last scrape read the queue statistics from the database, else 0 (and the queue series are absent).",
            )
            .expect("valid metric"),
        };
        for collector in [
            Box::new(gauges.depth.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(gauges.due.clone()),
            Box::new(gauges.oldest_due_age.clone()),
            Box::new(gauges.messages.clone()),
            Box::new(gauges.messages_exact.clone()),
            Box::new(gauges.unhealthy_mail_servers.clone()),
            Box::new(gauges.up.clone()),
        ] {
            registry.register(collector).expect("distinct metric names");
        }
        gauges
    }

    fn set(&self, stats: Option<&QueueStats>) {
        let Some(stats) = stats else {
            // Stale values would look like a stuck queue: drop them instead.
            self.depth.reset();
            self.due.reset();
            self.oldest_due_age.reset();
            self.messages.reset();
            self.unhealthy_mail_servers.reset();
            self.up.set(0);
            return;
        };
        for (queue, depth) in [
            ("messages", &stats.messages),
            ("webhook_events", &stats.webhook_events),
        ] {
            self.depth
                .with_label_values(&[queue])
                .set(i64::try_from(depth.pending).unwrap_or(i64::MAX));
            self.due
                .with_label_values(&[queue])
                .set(i64::try_from(depth.due).unwrap_or(i64::MAX));
            self.oldest_due_age
                .with_label_values(&[queue])
                .set(depth.oldest_due_age_secs);
        }
        for (status, count) in &stats.messages_by_status {
            self.messages
                .with_label_values(&[status.as_str()])
                .set(i64::try_from(*count).unwrap_or(i64::MAX));
        }
        self.messages_exact
            .set(i64::from(stats.message_counts_exact));
        self.unhealthy_mail_servers
            .with_label_values(&[])
            .set(i64::try_from(stats.unhealthy_mail_servers).unwrap_or(i64::MAX));
        self.up.set(1);
    }
}

impl Metrics {
    /// A fresh registry with every series registered; `/metrics` also exposes the series
    /// of `gathered` (registries the server owns).
    ///
    /// # Panics
    /// Never in practice: the series names are fixed and distinct.
    pub fn new(pool_state: PoolStateFn, gathered: Vec<Registry>) -> Self {
        let registry = Registry::new_custom(Some("mailroom".into()), None).expect("valid prefix");
        let requests = IntCounterVec::new(
            Opts::new(
                "http_requests_total",
                "HTTP requests by method, route and status.",
            ),
            &["method", "route", "status"],
        )
        .expect("valid metric");
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "http_request_duration_seconds",
                "HTTP request latency by method and route.",
            )
            .buckets(vec![
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ]),
            &["method", "route"],
        )
        .expect("valid metric");
        let pool_connections = IntGauge::new("db_pool_connections", "Open database connections.")
            .expect("valid metric");
        let pool_idle = IntGauge::new("db_pool_idle_connections", "Idle database connections.")
            .expect("valid metric");
        for collector in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(latency.clone()),
            Box::new(pool_connections.clone()),
            Box::new(pool_idle.clone()),
        ] {
            registry.register(collector).expect("distinct metric names");
        }
        let queue = QueueGauges::new(&registry);
        Self {
            registry,
            requests,
            latency,
            pool_connections,
            pool_idle,
            pool_state,
            queue,
            gathered,
        }
    }

    /// Records one finished request. `route` is the matched pattern, never the raw path,
    /// so ids do not explode the label set.
    pub fn observe_request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        self.requests
            .with_label_values(&[method, route, &status.to_string()])
            .inc();
        self.latency
            .with_label_values(&[method, route])
            .observe(elapsed.as_secs_f64());
    }

    /// The text exposition of every series, with the queue gauges from `queue_stats`
    /// (`None` when the database could not be read: the queue series are left out).
    pub fn render(&self, queue_stats: Option<&QueueStats>) -> String {
        let (connections, idle) = (self.pool_state)();
        self.pool_connections.set(i64::from(connections));
        self.pool_idle.set(i64::from(idle));
        self.queue.set(queue_stats);
        let mut families = self.registry.gather();
        for registry in &self.gathered {
            families.extend(registry.gather());
        }
        let mut buffer = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&families, &mut buffer) {
            tracing::error!(%error, "metrics encoding failed");
        }
        String::from_utf8(buffer).unwrap_or_default()
    }
}
