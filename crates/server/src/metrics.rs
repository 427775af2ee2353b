//! The process's delivery metrics, owned by the server: the workers bump
//! [`DeliveryCounters`] directly, and the HTTP layer's `/metrics` (the API's, or the
//! separate `MAILROOM_METRICS_LISTEN` listener) gathers their registry at scrape time.
//! Workers never import the HTTP adapter.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

/// Counters the delivery workers bump, one set per process (a `serve` process with
/// workers exports them on its `/metrics`, a `worker` on `MAILROOM_METRICS_LISTEN`).
/// Process-wide because the workers and the HTTP listeners of one process are built
/// apart; the HTTP layer gathers [`DeliveryCounters::registry`] at scrape time.
pub struct DeliveryCounters {
    registry: Registry,
    smtp_replies: IntCounterVec,
    webhook_deliveries: IntCounterVec,
    inbound_smtp: IntCounterVec,
    queue_wakeups_listening: IntGauge,
}

/// How one SMTP session ended, as counted by `mailroom_smtp_replies_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpReplyClass {
    /// 2xx to the end of DATA.
    Accepted,
    /// A permanent refusal of the recipient.
    HardBounce,
    /// Any other permanent refusal, or a local permanent fault.
    Permanent,
    /// A 3xx/4xx reply.
    Transient,
    /// No reply: a time-out, a dropped connection, a TLS or DNS failure.
    Connection,
}

impl SmtpReplyClass {
    fn label(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::HardBounce => "hard_bounce",
            Self::Permanent => "permanent",
            Self::Transient => "transient",
            Self::Connection => "connection",
        }
    }
}

impl DeliveryCounters {
    fn new() -> Self {
        let registry = Registry::new_custom(Some("mailroom".into()), None).expect("valid prefix");
        let smtp_replies = IntCounterVec::new(
            Opts::new(
                "smtp_replies_total",
                "SMTP sessions of the message worker by how they ended.",
            ),
            &["class"],
        )
        .expect("valid metric");
        let webhook_deliveries = IntCounterVec::new(
            Opts::new(
                "webhook_deliveries_total",
                "Webhook delivery attempts recorded, by the event's resulting status.",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        let inbound_smtp = IntCounterVec::new(
            Opts::new(
                "inbound_smtp_total",
                "Messages and refusals of the inbound SMTP listener (VERP return paths), by outcome or reason.",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        let queue_wakeups_listening = IntGauge::new(
            "queue_wakeups_listening",
            "1 while this process's message worker hears the queue's wake-ups (LISTEN), 0 while it finds new mail by polling only.",
        )
        .expect("valid metric");
        registry
            .register(Box::new(queue_wakeups_listening.clone()))
            .expect("distinct metric names");
        registry
            .register(Box::new(inbound_smtp.clone()))
            .expect("distinct metric names");
        for label in mailroom_smtp::inbound::LABELS {
            inbound_smtp.with_label_values(&[label]);
        }
        registry
            .register(Box::new(smtp_replies.clone()))
            .expect("distinct metric names");
        registry
            .register(Box::new(webhook_deliveries.clone()))
            .expect("distinct metric names");
        // Every label present from the start, so rates work from the first scrape.
        for class in [
            SmtpReplyClass::Accepted,
            SmtpReplyClass::HardBounce,
            SmtpReplyClass::Permanent,
            SmtpReplyClass::Transient,
            SmtpReplyClass::Connection,
        ] {
            smtp_replies.with_label_values(&[class.label()]);
        }
        for outcome in ["delivered", "retrying", "failed"] {
            webhook_deliveries.with_label_values(&[outcome]);
        }
        Self {
            registry,
            smtp_replies,
            webhook_deliveries,
            inbound_smtp,
            queue_wakeups_listening,
        }
    }

    /// The registry holding these counters, for the `/metrics` exposition.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Counts one SMTP session.
    pub fn smtp_reply(&self, class: SmtpReplyClass) {
        self.smtp_replies.with_label_values(&[class.label()]).inc();
    }

    /// Whether the message worker hears the queue's wake-ups now.
    pub fn queue_wakeups_listening(&self, listening: bool) {
        self.queue_wakeups_listening.set(i64::from(listening));
    }

    /// Counts one event of the inbound SMTP listener (its label).
    pub fn inbound(&self, outcome: &str) {
        self.inbound_smtp.with_label_values(&[outcome]).inc();
    }

    /// Counts recorded webhook attempts by the status they left their events in.
    pub fn webhook_deliveries(&self, delivered: usize, retrying: usize, failed: usize) {
        for (outcome, count) in [
            ("delivered", delivered),
            ("retrying", retrying),
            ("failed", failed),
        ] {
            self.webhook_deliveries
                .with_label_values(&[outcome])
                .inc_by(u64::try_from(count).unwrap_or(u64::MAX));
        }
    }
}

/// This process's delivery counters, registered in a registry of their own that
/// [`DeliveryCounters::registry`] hands to the HTTP layer.
pub fn delivery_counters() -> &'static DeliveryCounters {
    static COUNTERS: OnceLock<DeliveryCounters> = OnceLock::new();
    COUNTERS.get_or_init(DeliveryCounters::new)
}
