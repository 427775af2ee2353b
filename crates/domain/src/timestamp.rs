//! Points in time, always UTC with millisecond precision, written as
//! `2026-11-22T12:45:09.123Z`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::{format_description::well_known::Rfc3339, Duration, OffsetDateTime, UtcOffset};

/// A UTC instant truncated to whole milliseconds, so what is stored is what is shown.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Timestamp(OffsetDateTime);

/// The text was not an RFC 3339 timestamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an RFC 3339 timestamp")]
pub struct InvalidTimestamp;

impl Timestamp {
    /// Converts any instant to UTC and truncates it to milliseconds.
    ///
    /// # Panics
    /// When the instant cannot be expressed in UTC (within a day of year ±9999 with an
    /// offset pushing it past); [`Timestamp::parse`] refuses such text instead.
    pub fn from_datetime(at: OffsetDateTime) -> Self {
        let utc = at.to_offset(UtcOffset::UTC);
        let millis = utc.millisecond();
        Self(
            utc.replace_millisecond(millis)
                .expect("a millisecond read from a valid time is valid"),
        )
    }

    /// The instant as a `time` value (UTC).
    pub fn as_datetime(&self) -> OffsetDateTime {
        self.0
    }

    /// Parses RFC 3339 text with any offset.
    ///
    /// # Errors
    /// [`InvalidTimestamp`] when the text is not RFC 3339.
    pub fn parse(text: &str) -> Result<Self, InvalidTimestamp> {
        let parsed = OffsetDateTime::parse(text, &Rfc3339).map_err(|_| InvalidTimestamp)?;
        // `9999-12-31T23:00:00-05:00` is valid RFC 3339 but lies past the last UTC year.
        let utc = parsed
            .checked_to_offset(UtcOffset::UTC)
            .ok_or(InvalidTimestamp)?;
        Ok(Self::from_datetime(utc))
    }

    /// An RFC 3339 timestamp, or a calendar day written `YYYY-MM-DD` (the start of that
    /// UTC day), the way spreadsheets write dates.
    ///
    /// # Errors
    /// [`InvalidTimestamp`] for anything else.
    pub fn parse_timestamp_or_day(text: &str) -> Result<Self, InvalidTimestamp> {
        Self::parse(text).or_else(|_| {
            let format = time::macros::format_description!("[year]-[month]-[day]");
            time::Date::parse(text, &format)
                .map(|day| Self::from_datetime(day.midnight().assume_utc()))
                .map_err(|_| InvalidTimestamp)
        })
    }

    /// This instant moved by `duration`.
    pub fn plus(&self, duration: Duration) -> Self {
        Self::from_datetime(self.0 + duration)
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_millis(&self) -> i128 {
        self.0.unix_timestamp_nanos() / 1_000_000
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0;
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.millisecond()
        )
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({self})")
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calendar_day_reads_as_the_start_of_that_utc_day() {
        let day = Timestamp::parse_timestamp_or_day("2026-03-01").expect("a day");
        assert_eq!(
            day,
            Timestamp::parse("2026-03-01T00:00:00Z").expect("rfc 3339")
        );
        assert!(Timestamp::parse_timestamp_or_day("2026-13-01").is_err());
        assert!(Timestamp::parse_timestamp_or_day("01/03/2026").is_err());
        assert!(
            Timestamp::parse("2026-03-01").is_err(),
            "the API's dates stay RFC 3339"
        );
    }

    #[test]
    fn formats_utc_with_milliseconds() {
        let at = Timestamp::parse("2026-11-22T13:45:09.123456+01:00").expect("valid");
        assert_eq!(at.to_string(), "2026-11-22T12:45:09.123Z");
        let whole = Timestamp::parse("2026-01-02T03:04:05Z").expect("valid");
        assert_eq!(whole.to_string(), "2026-01-02T03:04:05.000Z");
        assert!(Timestamp::parse("yesterday").is_err());
        assert!(
            Timestamp::parse("9999-12-31T23:00:00-05:00").is_err(),
            "past the last UTC year"
        );
    }
}
