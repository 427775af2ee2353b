//! DKIM for mail from verified sending domains: the keys (2048-bit RSA, made with the
//! `rsa` crate lettre signs with) and the signature (lettre's `dkim`: relaxed/relaxed,
//! rsa-sha256). Canonicalisation is lettre's; nothing here touches the bytes it signs.
//!
//! lettre signs only the headers it holds itself, and it holds a MIME body's own
//! `Content-Type` with the body. So a message to be signed is built with its body
//! pre-encoded and the part's `Content-Type` and `Content-Transfer-Encoding` moved into
//! the message's headers: the same bytes on the wire, with those headers signed too.

use lettre::message::{
    dkim::{
        dkim_sign, DkimCanonicalization, DkimCanonicalizationType, DkimConfig,
        DkimSigningAlgorithm, DkimSigningKey,
    },
    header::{ContentTransferEncoding, ContentType, HeaderName, MIME_VERSION_1_0},
    Body, MessageBuilder,
};
use lettre::Message;
use mailroom_app::ports::{DkimKeyGenerator, DkimKeyPair, DkimSigning};
use mailroom_domain::{message::AttemptFault, secret::SecretString};
use rsa::pkcs1::{EncodeRsaPrivateKey, LineEnding};
use rsa::pkcs8::EncodePublicKey;
use rsa::{RsaPrivateKey, RsaPublicKey};

/// The size of every new key.
pub const DKIM_KEY_BITS: usize = 2048;

/// The headers every signature covers (those a message lacks are signed as absent, so
/// they cannot be added later either).
pub const SIGNED_HEADERS: [&str; 9] = [
    "From",
    "To",
    "Subject",
    "Date",
    "Message-ID",
    "MIME-Version",
    "Content-Type",
    "List-Unsubscribe",
    "List-Unsubscribe-Post",
];

/// Makes 2048-bit RSA keys from the operating system's random source.
#[derive(Debug, Clone, Copy, Default)]
pub struct RsaDkimKeys;

impl DkimKeyGenerator for RsaDkimKeys {
    fn generate(&self) -> Result<DkimKeyPair, String> {
        let private = RsaPrivateKey::new(&mut rand::rngs::OsRng, DKIM_KEY_BITS)
            .map_err(|error| error.to_string())?;
        let pem = private
            .to_pkcs1_pem(LineEnding::LF)
            .map_err(|error| error.to_string())?;
        let public_pem = RsaPublicKey::from(&private)
            .to_public_key_pem(LineEnding::LF)
            .map_err(|error| error.to_string())?;
        // DKIM's `p=` is the base64 of the DER SubjectPublicKeyInfo: the PEM's body.
        let public_key: String = public_pem
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .collect();
        Ok(DkimKeyPair {
            private_key_pem: SecretString::new(pem.as_str()),
            public_key,
        })
    }
}

/// The MIME body as lettre would write it, split for signing: the part's headers go to
/// the message, the rest is the body.
pub(crate) struct SplitBody {
    content_type: Option<ContentType>,
    encoding: ContentTransferEncoding,
    body: Vec<u8>,
}

impl SplitBody {
    /// Splits `formatted` (a part's `formatted()`), taking the headers from `headers`.
    pub(crate) fn new(formatted: &[u8], headers: &lettre::message::header::Headers) -> Self {
        let body = formatted
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or_else(Vec::new, |at| formatted[at + 4..].to_vec());
        Self {
            content_type: headers.get::<ContentType>(),
            // A multipart body holds only encoded parts and boundaries: 7bit.
            encoding: headers
                .get::<ContentTransferEncoding>()
                .unwrap_or(ContentTransferEncoding::SevenBit),
            body,
        }
    }

    /// The message: `builder`'s headers, then `MIME-Version`, the part's headers, and the
    /// body as it is.
    pub(crate) fn build(self, builder: MessageBuilder) -> Result<Message, AttemptFault> {
        let mut builder = builder.header(MIME_VERSION_1_0);
        if let Some(content_type) = self.content_type {
            builder = builder.header(content_type);
        }
        builder
            .body(Body::dangerous_pre_encoded(self.body, self.encoding))
            .map_err(|error| {
                AttemptFault::Permanent(format!("the message cannot be built: {error}"))
            })
    }
}

/// Adds a `DKIM-Signature` to `message`. A key that does not parse leaves the message
/// unsigned (a warning says so): unsigned mail is delivered where policy allows, failed
/// mail never is.
pub(crate) fn sign(message: &mut Message, signing: &DkimSigning) {
    let key = match DkimSigningKey::new(signing.private_key_pem.expose(), DkimSigningAlgorithm::Rsa)
    {
        Ok(key) => key,
        Err(error) => {
            tracing::warn!(domain = signing.domain.as_str(), %error, "the DKIM key does not parse: the message goes unsigned");
            return;
        }
    };
    let config = DkimConfig::new(
        signing.selector.clone(),
        signing.domain.as_str().to_owned(),
        key,
        SIGNED_HEADERS
            .iter()
            .map(|name| HeaderName::new_from_ascii_str(name))
            .collect(),
        DkimCanonicalization {
            header: DkimCanonicalizationType::Relaxed,
            body: DkimCanonicalizationType::Relaxed,
        },
    );
    dkim_sign(message, &config);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_2048_bit_pkcs1_with_a_dkim_public_key() {
        let pair = RsaDkimKeys.generate().expect("a key");
        assert!(pair
            .private_key_pem
            .expose()
            .starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        // 2048-bit SubjectPublicKeyInfo: 294 bytes, 392 base64 characters.
        assert_eq!(pair.public_key.len(), 392);
        assert!(
            DkimSigningKey::new(pair.private_key_pem.expose(), DkimSigningAlgorithm::Rsa).is_ok()
        );
    }
}
