//! Offset paging: `start` from 0 to [`MAX_START`] (default 0), `limit` ≥ 1 (default 25,
//! clamped to 100).

/// The default page size.
pub const DEFAULT_LIMIT: u32 = 25;
/// The largest page size; larger requests are clamped to it, not refused.
pub const MAX_LIMIT: u32 = 100;

/// The largest `start`: the largest offset the database can express (a signed 64-bit
/// integer). A larger one is refused rather than clamped, because the answer echoes
/// `start` and must echo what was asked.
pub const MAX_START: u64 = i64::MAX as u64;

/// One requested page, already clamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    /// Zero-based offset of the first item.
    pub start: u64,
    /// Page size after clamping, 1 to [`MAX_LIMIT`].
    pub limit: u32,
}

/// Why a paging parameter was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidPaging {
    /// `start` is not a whole number from 0 to [`MAX_START`].
    #[error("start must be a whole number from 0 to 9223372036854775807")]
    Start,
    /// `limit` is not a whole number ≥ 1.
    #[error("limit must be a whole number of at least 1")]
    Limit,
}

impl Default for PageRequest {
    fn default() -> Self {
        Self {
            start: 0,
            limit: DEFAULT_LIMIT,
        }
    }
}

impl PageRequest {
    /// Parses the raw query values; absent values take their defaults.
    ///
    /// # Errors
    /// [`InvalidPaging`] for negative, zero-limit or non-integer values.
    pub fn parse(start: Option<&str>, limit: Option<&str>) -> Result<Self, InvalidPaging> {
        let start = match start {
            None => 0,
            Some(text) => text
                .parse::<u64>()
                .ok()
                .filter(|start| *start <= MAX_START)
                .ok_or(InvalidPaging::Start)?,
        };
        let limit = match limit {
            None => DEFAULT_LIMIT,
            Some(text) => {
                // A huge but well-formed number is clamped like any other large limit.
                let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
                match text.parse::<u64>() {
                    Ok(0) => return Err(InvalidPaging::Limit),
                    Ok(n) => n.min(u64::from(MAX_LIMIT)) as u32,
                    Err(_) if digits_only => MAX_LIMIT,
                    Err(_) => return Err(InvalidPaging::Limit),
                }
            }
        };
        Ok(Self { start, limit })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_clamps_and_refusals() {
        assert_eq!(
            PageRequest::parse(None, None),
            Ok(PageRequest {
                start: 0,
                limit: 25
            })
        );
        assert_eq!(
            PageRequest::parse(Some("50"), Some("1000")),
            Ok(PageRequest {
                start: 50,
                limit: 100
            })
        );
        assert_eq!(
            PageRequest::parse(None, Some("99999999999999999999999")).map(|p| p.limit),
            Ok(100)
        );
        assert_eq!(
            PageRequest::parse(Some("-1"), None),
            Err(InvalidPaging::Start)
        );
        assert_eq!(
            PageRequest::parse(Some("9223372036854775807"), None).map(|p| p.start),
            Ok(MAX_START)
        );
        assert_eq!(
            PageRequest::parse(Some("9223372036854775808"), None),
            Err(InvalidPaging::Start)
        );
        assert_eq!(
            PageRequest::parse(Some("1.5"), None),
            Err(InvalidPaging::Start)
        );
        assert_eq!(
            PageRequest::parse(None, Some("0")),
            Err(InvalidPaging::Limit)
        );
        assert_eq!(
            PageRequest::parse(None, Some("-5")),
            Err(InvalidPaging::Limit)
        );
        assert_eq!(
            PageRequest::parse(None, Some("ten")),
            Err(InvalidPaging::Limit)
        );
        assert_eq!(
            PageRequest::parse(None, Some("")),
            Err(InvalidPaging::Limit)
        );
    }
}
