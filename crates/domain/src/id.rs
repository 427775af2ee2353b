//! Typed record identifiers. Every id is a UUIDv7 written as lowercase hyphenated text.

use std::fmt;

/// The text given was not a record id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a valid id")]
pub struct InvalidId;

macro_rules! define_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(uuid::Uuid);

        impl $name {
            /// Wraps a UUID minted by the id generator or read from storage.
            pub const fn from_uuid(uuid: uuid::Uuid) -> Self {
                Self(uuid)
            }

            /// The UUID behind this id.
            pub const fn as_uuid(&self) -> uuid::Uuid {
                self.0
            }

            /// Parses the canonical text form (36 characters, hyphenated, any hex case).
            ///
            /// # Errors
            /// [`InvalidId`] for any other text, which the API answers with 404.
            pub fn parse(text: &str) -> Result<Self, InvalidId> {
                if text.len() != 36 {
                    return Err(InvalidId);
                }
                uuid::Uuid::try_parse(text).map(Self).map_err(|_| InvalidId)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.0.hyphenated())
            }
        }

        impl std::str::FromStr for $name {
            type Err = InvalidId;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }
    };
}

define_id!(
    /// A console session (`/console`): a browser signed in by a token or a login link.
    ConsoleSessionId
);
define_id!(
    /// Identifies a user (a person who holds tokens and belongs to accounts).
    UserId
);
define_id!(
    /// Identifies a personal access token.
    TokenId
);
define_id!(
    /// Identifies an account (a workspace).
    AccountId
);
define_id!(
    /// Identifies an email template.
    TemplateId
);
define_id!(
    /// Identifies an automation.
    AutomationId
);
define_id!(
    /// Identifies an announcement topic.
    TopicId
);
define_id!(
    /// Identifies a saved segment (a named audience definition).
    SegmentId
);
define_id!(
    /// Identifies a mail server (an SMTP connection of an account).
    MailServerId
);
define_id!(
    /// Identifies a contact (a member of an account's audience).
    ContactId
);
define_id!(
    /// Identifies a recorded contact event.
    ContactEventId
);
define_id!(
    /// Identifies a webhook event (one queued or attempted delivery).
    WebhookEventId
);
define_id!(
    /// Identifies a message (one email in the outbox).
    MessageId
);
define_id!(
    /// Identifies an announcement (a one-off send to a segment).
    AnnouncementId
);
define_id!(
    /// Identifies a sending domain (a domain an account sends mail from).
    SendingDomainId
);
define_id!(
    /// Identifies one DKIM key of a sending domain (its selector and key pair).
    DkimKeyId
);
define_id!(
    /// Identifies a feedback source (one provider's event webhook bound to an account).
    FeedbackSourceId
);
define_id!(
    /// Identifies a subscribe form (a public sign-up form of an account).
    FormId
);
define_id!(
    /// Identifies one confirmation mail of a double opt-in form, named by its signed link.
    FormConfirmationId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_canonical_and_rejects_other_forms() {
        let text = "01936c5e-7b2a-7cde-8f00-0123456789ab";
        let id = AccountId::parse(text).expect("canonical id parses");
        assert_eq!(id.to_string(), text);
        assert_eq!(
            AccountId::parse("01936C5E-7B2A-7CDE-8F00-0123456789AB")
                .expect("upper case parses")
                .to_string(),
            text
        );
        for bad in [
            "",
            "nope",
            "01936c5e7b2a7cde8f000123456789ab",
            "{01936c5e-7b2a-7cde-8f00-0123456789ab}",
        ] {
            assert_eq!(AccountId::parse(bad), Err(InvalidId), "{bad}");
        }
    }
}
