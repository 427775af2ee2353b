//! Sending domains: the domains an account proves, through DNS, that it may send from.
//! Each holds DKIM keys (one selector each; the newest signs), and the records the
//! customer publishes: the DKIM key, hints for SPF and DMARC, and the return path. The
//! rules here judge what DNS answered; the lookups are an adapter's job
//! (docs/operations.md#sending-domains).

use crate::{DkimKeyId, SendingDomainId, Timestamp};

/// The longest domain name accepted: the DKIM record name
/// (`<selector>._domainkey.<domain>`) must stay within DNS's 253.
pub const MAX_DOMAIN_NAME: usize = 200;

/// A registrable DNS name, lower-cased: two or more dot-separated labels of letters,
/// digits and inner hyphens (1–63 characters each), the last alphabetic or an IDNA
/// `xn--` label, at most [`MAX_DOMAIN_NAME`] characters, no trailing dot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DomainName(String);

/// Why a text is not a domain name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidDomainName(&'static str);

impl DomainName {
    /// Checks and lower-cases `text`; a single trailing dot is dropped.
    ///
    /// # Errors
    /// [`InvalidDomainName`] saying what is wrong.
    pub fn parse(text: &str) -> Result<Self, InvalidDomainName> {
        let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
        if name.is_empty() {
            return Err(InvalidDomainName("must not be empty"));
        }
        if name.len() > MAX_DOMAIN_NAME {
            return Err(InvalidDomainName("must be at most 200 characters"));
        }
        let labels: Vec<&str> = name.split('.').collect();
        if labels.len() < 2 {
            return Err(InvalidDomainName(
                "must be a domain name with at least two labels, such as example.com",
            ));
        }
        let labels_valid = labels.iter().all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        });
        if !labels_valid {
            return Err(InvalidDomainName(
                "must be a domain name of letters, digits and hyphens in dot-separated labels of 1 to 63 characters",
            ));
        }
        let top = labels[labels.len() - 1];
        if !(top.bytes().all(|b| b.is_ascii_lowercase()) || top.starts_with("xn--")) {
            return Err(InvalidDomainName(
                "must end in a top-level domain of letters",
            ));
        }
        Ok(Self(name))
    }

    /// The name, lower-cased.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether mail from an address at `address_domain` aligns with this domain: the
    /// same name or a subdomain of it (DMARC's relaxed alignment), case-insensitively.
    pub fn covers(&self, address_domain: &str) -> bool {
        let other = address_domain
            .strip_suffix('.')
            .unwrap_or(address_domain)
            .to_ascii_lowercase();
        other == self.0
            || other
                .strip_suffix(self.0.as_str())
                .is_some_and(|prefix| prefix.ends_with('.'))
    }
}

/// The domain part of an email address (after the last `@`), if any.
pub fn address_domain(address: &str) -> Option<&str> {
    address
        .rsplit_once('@')
        .map(|(_, domain)| domain)
        .filter(|d| !d.is_empty())
}

/// The state of a domain or one of its records after the latest check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    /// Not checked yet.
    Pending,
    /// Found in DNS as expected.
    Verified,
    /// Checked and not found, or found with another value.
    Failed,
}

impl CheckStatus {
    /// The API and storage spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Verified => "verified",
            Self::Failed => "failed",
        }
    }

    /// Reads [`CheckStatus::as_str`] back.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "pending" => Some(Self::Pending),
            "verified" => Some(Self::Verified),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }

    fn judged(found: bool) -> Self {
        if found {
            Self::Verified
        } else {
            Self::Failed
        }
    }
}

/// One DKIM key of a domain, as the API shows it (the private key never leaves storage).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DkimSelector {
    /// The key's id.
    pub id: DkimKeyId,
    /// The selector: the DNS label the key is published under.
    pub selector: String,
    /// The public key: base64 of its DER `SubjectPublicKeyInfo`, as DKIM's `p=` tag.
    pub public_key: String,
    /// Whether its record was found at the latest check.
    pub status: CheckStatus,
    /// When it was made.
    pub created_at: Timestamp,
}

impl DkimSelector {
    /// `<selector>._domainkey.<domain>`.
    pub fn record_name(&self, domain: &DomainName) -> String {
        format!("{}._domainkey.{}", self.selector, domain.as_str())
    }

    /// `v=DKIM1; k=rsa; p=<key>`.
    pub fn record_value(&self) -> String {
        format!("v=DKIM1; k=rsa; p={}", self.public_key)
    }
}

/// The selector for a key made at `now`: `mr` and the UTC date, then four hex digits of
/// `random`, so two keys of one day differ (`mr20261124a1b2`).
pub fn selector_name(now: Timestamp, random: [u8; 2]) -> String {
    let date = now.as_datetime().date();
    format!(
        "mr{:04}{:02}{:02}{:02x}{:02x}",
        date.year(),
        u8::from(date.month()),
        date.day(),
        random[0],
        random[1]
    )
}

/// The most DKIM keys a domain holds at once: a rotation beyond it must first remove an
/// old selector.
pub const MAX_SELECTORS: usize = 4;

/// A sending domain as stored and shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendingDomain {
    /// Id.
    pub id: SendingDomainId,
    /// The domain.
    pub name: DomainName,
    /// `verified` when the record of one of its keys was found at the latest check.
    pub status: CheckStatus,
    /// Every key, oldest first; see [`SendingDomain::signing_selector`].
    pub selectors: Vec<DkimSelector>,
    /// Whether an SPF record was found at the latest check (a hint: not required).
    pub spf: CheckStatus,
    /// Whether a DMARC record was found at the latest check (a hint: not required).
    pub dmarc: CheckStatus,
    /// Whether `bounces.<domain>` has an MX to the operator's inbound host.
    pub return_path: CheckStatus,
    /// Creation time.
    pub created_at: Timestamp,
    /// The latest check that found the domain verified.
    pub verified_at: Option<Timestamp>,
    /// The latest check.
    pub checked_at: Option<Timestamp>,
}

/// A DNS record type the records list uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordType {
    /// TXT.
    Txt,
    /// MX.
    Mx,
}

impl RecordType {
    /// `TXT` or `MX`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Txt => "TXT",
            Self::Mx => "MX",
        }
    }
}

/// What purpose a record serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPurpose {
    /// A DKIM public key.
    Dkim,
    /// The SPF hint.
    Spf,
    /// The DMARC hint.
    Dmarc,
    /// The return path for bounces.
    ReturnPath,
}

impl RecordPurpose {
    /// `dkim`, `spf`, `dmarc`, `returnPath`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dkim => "dkim",
            Self::Spf => "spf",
            Self::Dmarc => "dmarc",
            Self::ReturnPath => "returnPath",
        }
    }
}

/// One record the customer publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsRecord {
    /// What it is for.
    pub purpose: RecordPurpose,
    /// Its type.
    pub record_type: RecordType,
    /// Its owner name.
    pub name: String,
    /// Its value (for MX, the exchange host; the preference is free).
    pub value: String,
    /// Whether it was found at the latest check.
    pub status: CheckStatus,
}

/// Why a key cannot be removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyRemovalRefused {
    /// The domain has no such selector.
    #[error("the domain has no such selector")]
    Unknown,
    /// It is the domain's only key.
    #[error("the domain's only key cannot be removed; delete the domain instead")]
    LastKey,
}

/// The most sending domains an account holds.
pub const MAX_DOMAINS_PER_ACCOUNT: u64 = 100;

/// The SPF hint: the relay's own SPF include is added by the customer.
pub const SPF_HINT: &str = "v=spf1 mx ~all";

impl SendingDomain {
    /// The key that signs: the newest whose record was found at the latest check. A new
    /// key (after a rotation) signs only once its record is published and checked, and
    /// until then the older one goes on signing.
    pub fn signing_selector(&self) -> Option<&DkimSelector> {
        self.selectors
            .iter()
            .rev()
            .find(|key| key.status == CheckStatus::Verified)
    }

    /// Removes the key `selector` and settles the domain's status on the keys left.
    ///
    /// # Errors
    /// [`KeyRemovalRefused`] for an unknown selector or the last key.
    pub fn remove_selector(&mut self, selector: &str) -> Result<DkimSelector, KeyRemovalRefused> {
        let index = self
            .selectors
            .iter()
            .position(|key| key.selector == selector)
            .ok_or(KeyRemovalRefused::Unknown)?;
        if self.selectors.len() == 1 {
            return Err(KeyRemovalRefused::LastKey);
        }
        let removed = self.selectors.remove(index);
        self.settle_status();
        Ok(removed)
    }

    /// The domain's status from its keys': verified while a key verifies; otherwise
    /// failed once checked, else pending.
    fn settle_status(&mut self) {
        self.status = if self.signing_selector().is_some() {
            CheckStatus::Verified
        } else if self.checked_at.is_some() {
            CheckStatus::Failed
        } else {
            CheckStatus::Pending
        };
    }

    /// `bounces.<domain>`, the return-path host.
    pub fn return_path_name(&self) -> String {
        format!("bounces.{}", self.name.as_str())
    }

    /// `_dmarc.<domain>`.
    pub fn dmarc_name(&self) -> String {
        format!("_dmarc.{}", self.name.as_str())
    }

    /// What to publish: one DKIM record per key (oldest first), the SPF and DMARC hints,
    /// and, when the operator runs an inbound host, the return-path MX.
    pub fn records(&self, inbound_host: Option<&str>) -> Vec<DnsRecord> {
        let mut records: Vec<DnsRecord> = self
            .selectors
            .iter()
            .map(|key| DnsRecord {
                purpose: RecordPurpose::Dkim,
                record_type: RecordType::Txt,
                name: key.record_name(&self.name),
                value: key.record_value(),
                status: key.status,
            })
            .collect();
        records.push(DnsRecord {
            purpose: RecordPurpose::Spf,
            record_type: RecordType::Txt,
            name: self.name.as_str().to_owned(),
            value: SPF_HINT.to_owned(),
            status: self.spf,
        });
        records.push(DnsRecord {
            purpose: RecordPurpose::Dmarc,
            record_type: RecordType::Txt,
            name: self.dmarc_name(),
            value: format!("v=DMARC1; p=none; rua=mailto:dmarc@{}", self.name.as_str()),
            status: self.dmarc,
        });
        if let Some(host) = inbound_host {
            records.push(DnsRecord {
                purpose: RecordPurpose::ReturnPath,
                record_type: RecordType::Mx,
                name: self.return_path_name(),
                value: host.to_owned(),
                status: self.return_path,
            });
        }
        records
    }

    /// Applies what DNS answered at `now`: each record's status, and the domain's
    /// (verified when the signing key's record was found). A failed lookup reads as
    /// "not found".
    pub fn judge(&mut self, answers: &DnsAnswers, inbound_host: Option<&str>, now: Timestamp) {
        for key in &mut self.selectors {
            let found = answers
                .dkim
                .iter()
                .find(|(selector, _)| *selector == key.selector)
                .is_some_and(|(_, texts)| texts.iter().any(|t| dkim_record_matches(t, key)));
            key.status = CheckStatus::judged(found);
        }
        self.spf = CheckStatus::judged(answers.spf.iter().any(|t| starts_with_tag(t, "v=spf1")));
        self.dmarc =
            CheckStatus::judged(answers.dmarc.iter().any(|t| starts_with_tag(t, "v=dmarc1")));
        self.return_path = match inbound_host {
            Some(host) => CheckStatus::judged(
                answers
                    .return_path_mx
                    .iter()
                    .any(|exchange| same_host(exchange, host)),
            ),
            None => CheckStatus::Pending,
        };
        self.checked_at = Some(now);
        self.settle_status();
        if self.status == CheckStatus::Verified {
            self.verified_at = Some(now);
        }
    }
}

/// What DNS answered for a domain's records (empty where nothing or an error came back).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsAnswers {
    /// Per selector, the TXT texts at its record name (each record's strings joined).
    pub dkim: Vec<(String, Vec<String>)>,
    /// TXT texts at the domain.
    pub spf: Vec<String>,
    /// TXT texts at `_dmarc.<domain>`.
    pub dmarc: Vec<String>,
    /// MX exchanges at `bounces.<domain>`.
    pub return_path_mx: Vec<String>,
}

fn starts_with_tag(text: &str, tag: &str) -> bool {
    text.trim_start()
        .get(..tag.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(tag))
}

fn same_host(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// Whether a DKIM TXT text publishes `key`: its `p=` tag (white space removed) is the
/// key, and `v` and `k`, when present, are `DKIM1` and `rsa` (RFC 6376 §3.6.1).
fn dkim_record_matches(text: &str, key: &DkimSelector) -> bool {
    let mut public_key = None;
    for tag in text.split(';') {
        let Some((name, value)) = tag.split_once('=') else {
            continue;
        };
        let value: String = value.chars().filter(|c| !c.is_whitespace()).collect();
        match name.trim() {
            "v" if value != "DKIM1" => return false,
            "k" if !value.eq_ignore_ascii_case("rsa") => return false,
            "p" => public_key = Some(value),
            _ => {}
        }
    }
    public_key.is_some_and(|p| p == key.public_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).expect("timestamp")
    }

    fn domain() -> SendingDomain {
        SendingDomain {
            id: SendingDomainId::from_uuid(crate::Uuid::nil()),
            name: DomainName::parse("Example.COM").expect("name"),
            status: CheckStatus::Pending,
            selectors: vec![DkimSelector {
                id: DkimKeyId::from_uuid(crate::Uuid::nil()),
                selector: "mr20261124abcd".into(),
                public_key: "MIIBIjANBg".into(),
                status: CheckStatus::Pending,
                created_at: at("2026-11-24T10:00:00Z"),
            }],
            spf: CheckStatus::Pending,
            dmarc: CheckStatus::Pending,
            return_path: CheckStatus::Pending,
            created_at: at("2026-11-24T10:00:00Z"),
            verified_at: None,
            checked_at: None,
        }
    }

    #[test]
    fn names_are_registrable_lower_cased_and_bounded() {
        assert_eq!(
            DomainName::parse("Mail.Example.com.").map(|d| d.0),
            Ok("mail.example.com".to_owned())
        );
        assert!(DomainName::parse("xn--bcher-kva.xn--tckwe").is_ok());
        for bad in [
            "",
            "localhost",
            "example",
            "1.2.3.4",
            "exa mple.com",
            "-a.com",
            "a-.com",
            "a..com",
            "_dmarc.example.com",
            "ex@mple.com",
        ] {
            assert!(DomainName::parse(bad).is_err(), "{bad:?}");
        }
        let long = format!("{}.com", vec!["a".repeat(60); 4].join("."));
        assert!(long.len() > MAX_DOMAIN_NAME);
        assert!(DomainName::parse(&long).is_err());
        assert!(DomainName::parse(&format!("{}.com", "a".repeat(64))).is_err());
    }

    #[test]
    fn coverage_is_the_domain_or_a_subdomain() {
        let name = DomainName::parse("example.com").expect("name");
        assert!(name.covers("example.com"));
        assert!(name.covers("EXAMPLE.com"));
        assert!(name.covers("news.example.com"));
        assert!(!name.covers("badexample.com"));
        assert!(!name.covers("example.com.evil.net"));
        assert_eq!(
            address_domain("a@b@news.example.com"),
            Some("news.example.com")
        );
        assert_eq!(address_domain("nobody"), None);
    }

    #[test]
    fn selectors_are_dated_labels() {
        let name = selector_name(at("2026-11-24T23:59:59Z"), [0xa1, 0x02]);
        assert_eq!(name, "mr20261124a102");
    }

    #[test]
    fn judging_follows_the_signing_key_and_lists_every_record() {
        let mut d = domain();
        let records = d.records(Some("in.mailroom.test"));
        let kinds: Vec<_> = records
            .iter()
            .map(|r| (r.purpose.as_str(), r.record_type.as_str(), r.name.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("dkim", "TXT", "mr20261124abcd._domainkey.example.com"),
                ("spf", "TXT", "example.com"),
                ("dmarc", "TXT", "_dmarc.example.com"),
                ("returnPath", "MX", "bounces.example.com"),
            ]
        );
        assert_eq!(records[0].value, "v=DKIM1; k=rsa; p=MIIBIjANBg");
        assert_eq!(d.records(None).len(), 3);

        let now = at("2026-11-24T11:00:00Z");
        d.judge(&DnsAnswers::default(), Some("in.mailroom.test"), now);
        assert_eq!(d.status, CheckStatus::Failed);
        assert_eq!(d.verified_at, None);
        assert_eq!(d.checked_at, Some(now));

        let answers = DnsAnswers {
            dkim: vec![(
                "mr20261124abcd".into(),
                vec!["v=DKIM1; k=rsa; p=MIIB IjAN Bg".into()],
            )],
            spf: vec!["v=spf1 include:relay.test ~all".into()],
            dmarc: vec!["v=DMARC1; p=reject".into()],
            return_path_mx: vec!["IN.mailroom.test.".into()],
        };
        d.judge(&answers, Some("in.mailroom.test"), now);
        assert_eq!(d.status, CheckStatus::Verified);
        assert_eq!(d.verified_at, Some(now));
        assert_eq!([d.spf, d.dmarc, d.return_path], [CheckStatus::Verified; 3]);

        // A rotation: the new key signs only once its record is found; the old one stays.
        d.selectors.push(DkimSelector {
            id: DkimKeyId::from_uuid(crate::Uuid::max()),
            selector: "mr20261125beef".into(),
            public_key: "NEWKEY".into(),
            status: CheckStatus::Pending,
            created_at: at("2026-11-25T10:00:00Z"),
        });
        assert_eq!(
            d.signing_selector().map(|k| k.selector.as_str()),
            Some("mr20261124abcd")
        );
        let mut both = answers.clone();
        both.dkim.push((
            "mr20261125beef".into(),
            vec!["v=DKIM1; k=rsa; p=NEWKEY".into()],
        ));
        d.judge(&both, Some("in.mailroom.test"), now);
        assert_eq!(
            d.signing_selector().map(|k| k.selector.as_str()),
            Some("mr20261125beef")
        );
        assert_eq!(d.remove_selector("nope"), Err(KeyRemovalRefused::Unknown));
        d.remove_selector("mr20261124abcd").expect("removed");
        assert_eq!(d.status, CheckStatus::Verified);
        assert_eq!(
            d.remove_selector("mr20261125beef"),
            Err(KeyRemovalRefused::LastKey)
        );
        d.selectors[0].public_key = "MIIBIjANBg".into();
        d.selectors[0].selector = "mr20261124abcd".into();

        // Another key's record, or a revoked one, does not verify.
        for text in [
            "v=DKIM1; k=rsa; p=OTHER",
            "v=DKIM1; k=rsa; p=",
            "v=DKIM2; p=MIIBIjANBg",
        ] {
            let answers = DnsAnswers {
                dkim: vec![("mr20261124abcd".into(), vec![text.into()])],
                ..DnsAnswers::default()
            };
            d.judge(&answers, None, now);
            assert_eq!(d.status, CheckStatus::Failed, "{text}");
            assert_eq!(d.return_path, CheckStatus::Pending);
        }
    }
}
