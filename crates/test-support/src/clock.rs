use std::sync::atomic::{AtomicI64, Ordering};

use mailroom_app::ports::Clock;
use mailroom_domain::Timestamp;
use time::{Duration, OffsetDateTime};

/// Real time plus an offset the test controls, so expiry and scheduling can be tested
/// without sleeping.
#[derive(Debug, Default)]
pub struct TestClock {
    offset_millis: AtomicI64,
}

impl TestClock {
    /// A clock showing real time.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let millis = i64::try_from(by.whole_milliseconds()).unwrap_or(i64::MAX);
        self.offset_millis.fetch_add(millis, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        let offset = Duration::milliseconds(self.offset_millis.load(Ordering::SeqCst));
        Timestamp::from_datetime(OffsetDateTime::now_utc() + offset)
    }
}
