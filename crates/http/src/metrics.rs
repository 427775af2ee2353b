//! Prometheus metrics of the HTTP layer and the connection pool.

use std::{sync::Arc, time::Duration};

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

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
}

impl Metrics {
    /// A fresh registry with every series registered.
    ///
    /// # Panics
    /// Never in practice: the series names are fixed and distinct.
    pub fn new(pool_state: PoolStateFn) -> Self {
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
        Self {
            registry,
            requests,
            latency,
            pool_connections,
            pool_idle,
            pool_state,
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

    /// The text exposition of every series.
    pub fn render(&self) -> String {
        let (connections, idle) = (self.pool_state)();
        self.pool_connections.set(i64::from(connections));
        self.pool_idle.set(i64::from(idle));
        let mut buffer = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&self.registry.gather(), &mut buffer) {
            tracing::error!(%error, "metrics encoding failed");
        }
        String::from_utf8(buffer).unwrap_or_default()
    }
}
