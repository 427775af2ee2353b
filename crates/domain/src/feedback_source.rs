//! Feedback sources: an email provider's bounce and complaint webhook (Amazon SES through
//! SNS, Postmark, Mailgun, SendGrid) bound to one account (docs/api-decisions.md,
//! "Provider events").
//!
//! A tenant relays through its own provider account, so the provider's events must land
//! in that tenant's Mailroom account and in no other. Each source names what
//! authenticates a request for it: the SNS topics whose signed messages are accepted, the
//! Mailgun signing key, the SendGrid verification key, or a secret Mailroom generated for
//! Postmark (which signs nothing). This module holds the values and their rules; the
//! signatures are checked and the payloads read in the app crate.

use std::fmt;

/// The most SNS topics one SES source accepts.
pub const MAX_TOPIC_ARNS: usize = 10;

/// The longest SNS topic ARN (AWS allows 256-character topic names plus the prefix).
pub const MAX_TOPIC_ARN_CHARS: usize = 400;

/// The longest Mailgun signing key or SendGrid public key accepted, in characters.
pub const MAX_KEY_CHARS: usize = 1024;

/// Which provider a source receives events from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// Amazon SES, through an SNS topic's HTTPS subscription.
    Ses,
    /// Postmark's bounce and spam complaint webhooks.
    Postmark,
    /// Mailgun's event webhooks (`failed`, `complained`).
    Mailgun,
    /// SendGrid's signed event webhook.
    Sendgrid,
}

impl Provider {
    /// Every provider, in the order the documentation lists them.
    pub const ALL: [Self; 4] = [Self::Ses, Self::Postmark, Self::Mailgun, Self::Sendgrid];

    /// The wire name: `ses`, `postmark`, `mailgun` or `sendgrid`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ses => "ses",
            Self::Postmark => "postmark",
            Self::Mailgun => "mailgun",
            Self::Sendgrid => "sendgrid",
        }
    }

    /// The provider with this wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|provider| provider.as_str() == text)
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `arn` is an SNS topic ARN: `arn:<partition>:sns:<region>:<12-digit
/// account>:<topic name>`, the topic name of letters, digits, `-` and `_` (and a
/// trailing `.fifo`).
pub fn is_topic_arn(arn: &str) -> bool {
    if arn.len() > MAX_TOPIC_ARN_CHARS {
        return false;
    }
    let parts: Vec<&str> = arn.split(':').collect();
    let [prefix, partition, service, region, account, topic] = parts.as_slice() else {
        return false;
    };
    let name = topic.strip_suffix(".fifo").unwrap_or(topic);
    *prefix == "arn"
        && partition.starts_with("aws")
        && *service == "sns"
        && is_region(region)
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether `host` is an SNS endpoint, `sns.<region>.amazonaws.com` (or `.com.cn`): the
/// only hosts a signing certificate or a subscription confirmation is fetched from.
pub fn is_sns_host(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    let Some(rest) = host.strip_prefix("sns.") else {
        return false;
    };
    let region = rest
        .strip_suffix(".amazonaws.com")
        .or_else(|| rest.strip_suffix(".amazonaws.com.cn"));
    region.is_some_and(is_region)
}

/// An AWS region name: lower-case letters, digits and dashes (`eu-west-1`,
/// `us-gov-west-1`), no dots.
fn is_region(region: &str) -> bool {
    (2..=32).contains(&region.len())
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !region.starts_with('-')
        && !region.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_round_trip_their_wire_names() {
        for provider in Provider::ALL {
            assert_eq!(Provider::parse(provider.as_str()), Some(provider));
        }
        assert_eq!(Provider::parse("SES"), None);
        assert_eq!(Provider::parse("sparkpost"), None);
    }

    #[test]
    fn topic_arns_are_checked_part_by_part() {
        assert!(is_topic_arn(
            "arn:aws:sns:us-east-1:123456789012:ses-feedback"
        ));
        assert!(is_topic_arn(
            "arn:aws-cn:sns:cn-north-1:123456789012:a_b.fifo"
        ));
        assert!(!is_topic_arn("arn:aws:sqs:us-east-1:123456789012:queue"));
        assert!(!is_topic_arn("arn:aws:sns:us-east-1:1234:topic"));
        assert!(!is_topic_arn("arn:aws:sns:us-east-1:123456789012:"));
        assert!(!is_topic_arn("arn:aws:sns:us-east-1:123456789012:a:b"));
        assert!(!is_topic_arn("arn:aws:sns:US-EAST-1:123456789012:topic"));
    }

    #[test]
    fn only_sns_endpoints_are_sns_hosts() {
        assert!(is_sns_host("sns.us-east-1.amazonaws.com"));
        assert!(is_sns_host("SNS.eu-west-1.amazonaws.com"));
        assert!(is_sns_host("sns.cn-north-1.amazonaws.com.cn"));
        assert!(!is_sns_host("sns.us-east-1.amazonaws.com.evil.example"));
        assert!(!is_sns_host("evil.example"));
        assert!(!is_sns_host("sns.amazonaws.com"));
        assert!(!is_sns_host("sns.a.b.amazonaws.com"));
        assert!(!is_sns_host("s3.us-east-1.amazonaws.com"));
        assert!(!is_sns_host("sns..amazonaws.com"));
    }
}
