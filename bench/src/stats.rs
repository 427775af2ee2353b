//! Latency percentiles and number formatting for the report.

use std::time::Duration;

/// Sorted latencies of one measurement.
pub struct Latencies(Vec<Duration>);

impl Latencies {
    pub fn new(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Self(samples)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The nearest-rank percentile (`p` in 0..=100); zero when there are no samples.
    pub fn percentile(&self, p: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1]
    }
}

/// Milliseconds with two decimals.
pub fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// A whole number with thousands separators.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `a / b` as "1.23x", or "n/a" without a reference.
pub fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "n/a".to_owned()
    }
}

/// "met" or "MISSED", for target lines.
pub fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples = Latencies::new((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!(samples.percentile(50.0), Duration::from_millis(50));
        assert_eq!(samples.percentile(95.0), Duration::from_millis(95));
        assert_eq!(samples.percentile(100.0), Duration::from_millis(100));
        assert_eq!(Latencies::new(Vec::new()).percentile(99.0), Duration::ZERO);
    }

    #[test]
    fn numbers_read_naturally() {
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(ratio(3.0, 2.0), "1.50x");
        assert_eq!(ratio(1.0, 0.0), "n/a");
    }
}
