//! VERP return paths (docs/operations.md#sending-domains): the envelope sender of mail
//! from a sending domain whose return-path record is verified, so that a bounce or
//! complaint sent back to it names the message it is about.
//!
//! The address is `bounces+<token>@bounces.<domain>`. The token is the lowercase base32
//! (RFC 4648 alphabet, no padding) of the message's 16-byte id followed by the first
//! [`TAG_LEN`] bytes of an HMAC-SHA256 over a version byte, the account's id and the
//! message's id: 26 bytes, [`TOKEN_CHARS`] characters. The account is bound into the tag
//! but not carried in the token (the receiver knows it from the domain the address is
//! at), which keeps the local part short. The HMAC itself is the caller's: a `sign`
//! function keyed with the server's link-signing key and purpose [`PURPOSE`], as the
//! tracking tokens are, so this module stays pure.

use crate::{sending_domain::DomainName, AccountId, MessageId, Uuid};

/// The purpose the HMAC of a return-path token is bound to (tags for tracking links do
/// not verify here, nor these there).
pub const PURPOSE: &str = "return-path";

/// Bytes of the HMAC kept in a token: 80 bits. A forger needs about 2^79 tries per
/// message, each one an SMTP transaction the listener rate-limits.
pub const TAG_LEN: usize = 10;

/// Characters of an encoded token: base32 of 16 + [`TAG_LEN`] bytes.
pub const TOKEN_CHARS: usize = 42;

/// The local part before the token.
pub const LOCAL_PREFIX: &str = "bounces+";

/// The label before the sending domain in the return-path domain.
pub const DOMAIN_PREFIX: &str = "bounces.";

const VERSION: u8 = 1;
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
const BYTES: usize = 16 + TAG_LEN;

/// A return-path token: the message it names and the tag that proves the server minted
/// it for that message of one account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReturnPathToken {
    message: MessageId,
    tag: [u8; TAG_LEN],
}

/// The bytes the tag is computed over: version, account id, message id.
pub fn signed_bytes(account: AccountId, message: MessageId) -> [u8; 33] {
    let mut bytes = [0u8; 33];
    bytes[0] = VERSION;
    bytes[1..17].copy_from_slice(account.as_uuid().as_bytes());
    bytes[17..].copy_from_slice(message.as_uuid().as_bytes());
    bytes
}

impl ReturnPathToken {
    /// The token for `message` of `account`; `sign` is HMAC-SHA256 under the server's
    /// key with [`PURPOSE`] bound in.
    pub fn mint(
        account: AccountId,
        message: MessageId,
        sign: impl FnOnce(&[u8]) -> [u8; 32],
    ) -> Self {
        let full = sign(&signed_bytes(account, message));
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&full[..TAG_LEN]);
        Self { message, tag }
    }

    /// The message the token names (not yet proven: see [`ReturnPathToken::verify`]).
    pub fn message(&self) -> MessageId {
        self.message
    }

    /// Whether the token was minted for its message of `account`: its tag equals the
    /// first [`TAG_LEN`] bytes of `sign`'s HMAC, compared in constant time.
    pub fn verify(&self, account: AccountId, sign: impl FnOnce(&[u8]) -> [u8; 32]) -> bool {
        let full = sign(&signed_bytes(account, self.message));
        full[..TAG_LEN]
            .iter()
            .zip(&self.tag)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }

    /// The token's text: [`TOKEN_CHARS`] lowercase base32 characters.
    pub fn encode(&self) -> String {
        let mut bytes = [0u8; BYTES];
        bytes[..16].copy_from_slice(self.message.as_uuid().as_bytes());
        bytes[16..].copy_from_slice(&self.tag);
        let mut text = String::with_capacity(TOKEN_CHARS);
        let mut buffer: u32 = 0;
        let mut bits = 0;
        for byte in bytes {
            buffer = (buffer << 8) | u32::from(byte);
            bits += 8;
            while bits >= 5 {
                bits -= 5;
                text.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
            }
        }
        if bits > 0 {
            text.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
        }
        text
    }

    /// Reads [`ReturnPathToken::encode`] back: exactly [`TOKEN_CHARS`] characters of the
    /// lowercase alphabet, the unused low bits zero (so each token has one spelling).
    /// `None` for anything else, uppercase included.
    pub fn parse(text: &str) -> Option<Self> {
        if text.len() != TOKEN_CHARS {
            return None;
        }
        let mut bytes = [0u8; BYTES];
        let mut filled = 0;
        let mut buffer: u32 = 0;
        let mut bits = 0;
        for ch in text.bytes() {
            let value = ALPHABET.iter().position(|&a| a == ch)? as u32;
            buffer = (buffer << 5) | value;
            bits += 5;
            if bits >= 8 {
                bits -= 8;
                *bytes.get_mut(filled)? = (buffer >> bits) as u8;
                filled += 1;
            }
            buffer &= (1 << bits) - 1;
        }
        if filled != BYTES || buffer != 0 {
            return None;
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(&bytes[..16]);
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&bytes[16..]);
        Some(Self {
            message: MessageId::from_uuid(Uuid::from_bytes(id)),
            tag,
        })
    }

    /// The envelope sender for mail from `domain`: `bounces+<token>@bounces.<domain>`.
    pub fn address(&self, domain: &DomainName) -> String {
        format!(
            "{LOCAL_PREFIX}{}@{DOMAIN_PREFIX}{}",
            self.encode(),
            domain.as_str()
        )
    }
}

/// Why a recipient is not a return-path address this server takes mail for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotReturnPath {
    /// The domain is not `bounces.<domain>`: mail for anywhere else (relaying).
    OtherDomain,
    /// The domain is a return-path domain but the local part is not `bounces+<token>`
    /// with a well-formed token.
    MalformedToken,
}

/// A recipient address split into the sending domain it is the return path of and the
/// token it carries (not yet verified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnPathAddress {
    /// The sending domain (`acme.example` for `…@bounces.acme.example`).
    pub domain: DomainName,
    /// The token of the local part.
    pub token: ReturnPathToken,
}

impl ReturnPathAddress {
    /// Splits `address` (as given in `RCPT TO`, without angle brackets). The domain is
    /// read without case; the local part is taken as it is (SMTP local parts are case
    /// sensitive, and the server never mints uppercase).
    ///
    /// # Errors
    /// [`NotReturnPath`] saying which part does not fit.
    pub fn parse(address: &str) -> Result<Self, NotReturnPath> {
        let (local, domain) = address.rsplit_once('@').ok_or(NotReturnPath::OtherDomain)?;
        let domain = domain.to_ascii_lowercase();
        let sending = domain
            .strip_prefix(DOMAIN_PREFIX)
            .and_then(|rest| DomainName::parse(rest).ok())
            .ok_or(NotReturnPath::OtherDomain)?;
        let token = local
            .strip_prefix(LOCAL_PREFIX)
            .and_then(ReturnPathToken::parse)
            .ok_or(NotReturnPath::MalformedToken)?;
        Ok(Self {
            domain: sending,
            token,
        })
    }
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    use super::*;

    fn signer(key: &'static [u8]) -> impl Fn(&[u8]) -> [u8; 32] {
        move |bytes| {
            let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
            mac.update(PURPOSE.as_bytes());
            mac.update(bytes);
            mac.finalize().into_bytes().into()
        }
    }

    fn ids() -> (AccountId, MessageId) {
        (
            AccountId::from_uuid(Uuid::from_u128(0x0193_6c5e_7b2a_7cde_8f00_0123_4567_89ab)),
            MessageId::from_uuid(Uuid::from_u128(0xffee_ddcc_bbaa_9988_7766_5544_3322_1100)),
        )
    }

    #[test]
    fn a_token_round_trips_as_42_lowercase_characters_and_verifies() {
        let (account, message) = ids();
        let token = ReturnPathToken::mint(account, message, signer(b"key"));
        let text = token.encode();
        assert_eq!(text.len(), TOKEN_CHARS);
        assert!(text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b)));
        let parsed = ReturnPathToken::parse(&text).expect("parses");
        assert_eq!(parsed, token);
        assert_eq!(parsed.message(), message);
        assert!(parsed.verify(account, signer(b"key")));
    }

    #[test]
    fn a_wrong_key_or_another_account_does_not_verify() {
        let (account, message) = ids();
        let token = ReturnPathToken::mint(account, message, signer(b"key"));
        assert!(!token.verify(account, signer(b"other key")));
        let other = AccountId::from_uuid(Uuid::from_u128(7));
        assert!(!token.verify(other, signer(b"key")));
    }

    #[test]
    fn a_forged_token_for_another_message_does_not_verify() {
        let (account, message) = ids();
        let text = ReturnPathToken::mint(account, message, signer(b"key")).encode();
        // Change one character of the message id part, keep the tag.
        let mut forged = text.clone().into_bytes();
        forged[0] = if forged[0] == b'a' { b'b' } else { b'a' };
        let forged =
            ReturnPathToken::parse(std::str::from_utf8(&forged).unwrap()).expect("well-formed");
        assert_ne!(forged.message(), message);
        assert!(!forged.verify(account, signer(b"key")));
    }

    #[test]
    fn truncated_padded_uppercase_and_foreign_texts_do_not_parse() {
        let (account, message) = ids();
        let text = ReturnPathToken::mint(account, message, signer(b"key")).encode();
        assert_eq!(ReturnPathToken::parse(&text[..41]), None, "truncated");
        assert_eq!(ReturnPathToken::parse(&format!("{text}a")), None, "longer");
        assert_eq!(
            ReturnPathToken::parse(&text.to_ascii_uppercase()),
            None,
            "uppercase"
        );
        assert_eq!(ReturnPathToken::parse(&format!("{}=", &text[..41])), None);
        for garbage in ["", "0", &"1".repeat(42), &"8".repeat(42), "ä"] {
            assert_eq!(ReturnPathToken::parse(garbage), None, "{garbage}");
        }
        // The last character carries two unused bits: a second spelling of the same
        // bytes is refused.
        let last = text.as_bytes()[41];
        let index = ALPHABET.iter().position(|&a| a == last).unwrap();
        let mut other = text.clone().into_bytes();
        other[41] = ALPHABET[index | 1];
        if other[41] != last {
            assert_eq!(
                ReturnPathToken::parse(std::str::from_utf8(&other).unwrap()),
                None
            );
        }
    }

    #[test]
    fn an_address_splits_into_domain_and_token() {
        let (account, message) = ids();
        let token = ReturnPathToken::mint(account, message, signer(b"key"));
        let domain = DomainName::parse("acme.example").unwrap();
        let address = token.address(&domain);
        assert!(address.starts_with("bounces+"));
        assert!(address.ends_with("@bounces.acme.example"));
        let parsed = ReturnPathAddress::parse(&address).expect("a return path");
        assert_eq!(parsed.domain, domain);
        assert_eq!(parsed.token, token);
        let upper_domain = address.replace("bounces.acme", "BOUNCES.Acme");
        assert_eq!(ReturnPathAddress::parse(&upper_domain), Ok(parsed));
    }

    #[test]
    fn other_addresses_are_refused_by_reason() {
        assert_eq!(
            ReturnPathAddress::parse("ada@example.org"),
            Err(NotReturnPath::OtherDomain)
        );
        assert_eq!(
            ReturnPathAddress::parse("bounces+abc@example.org"),
            Err(NotReturnPath::OtherDomain)
        );
        assert_eq!(
            ReturnPathAddress::parse("no-at-sign"),
            Err(NotReturnPath::OtherDomain)
        );
        assert_eq!(
            ReturnPathAddress::parse("postmaster@bounces.acme.example"),
            Err(NotReturnPath::MalformedToken)
        );
        assert_eq!(
            ReturnPathAddress::parse("bounces+short@bounces.acme.example"),
            Err(NotReturnPath::MalformedToken)
        );
    }
}
