use mailroom_domain::{
    mail_server::{MailServer, MailServerInput, MailServerSettings},
    MailServerId, ValidationErrors,
};

use super::password_slot;
use crate::{
    auth::Member,
    domains::check_sender,
    ports::{
        in_transaction, CredentialCheck, MailServerRecord, ProbeError, SmtpEndpoint, SmtpSecurity,
    },
    AppError, Services,
};

/// A saved mail server and what the check could not establish.
#[derive(Debug, Clone)]
pub struct SavedMailServer {
    /// The stored server.
    pub server: MailServer,
    /// Things the caller should know, such as a relay that offers no AUTH.
    pub warnings: Vec<String>,
    /// The check sent the credentials over an unencrypted connection (the server offered
    /// no STARTTLS and `requireTLS` is off), and every send will.
    pub credentials_sent_in_clear: bool,
}

/// The warning for a relay without AUTH (docs/design.md#8-delivery).
pub const NO_AUTH_WARNING: &str =
    "the server advertises no AUTH mechanism: the credentials were not checked and mail will be sent without authentication";

/// The warning for credentials that went over a plain connection.
pub const CLEAR_TEXT_WARNING: &str =
    "the server offers no STARTTLS, so the username and password were sent unencrypted, and every send will do the same; set requireTLS to refuse such a server, or use its TLS port with secure";

/// Creates a mail server after checking its settings against the live server.
///
/// # Errors
/// [`AppError::Invalid`] for bad fields or a failed check (the detail carries the server's
/// reply).
pub fn create_mail_server(
    services: &Services,
    member: &Member,
    input: MailServerInput,
) -> Result<SavedMailServer, AppError> {
    let id = MailServerId::from_uuid(services.ids.next_uuid());
    save(services, member, id, input, Mode::Create)
}

/// Replaces every setting of a mail server (there is no partial update) after checking
/// them against the live server.
///
/// # Errors
/// As [`create_mail_server`], and [`AppError::NotFound`] for an unknown server.
pub fn update_mail_server(
    services: &Services,
    member: &Member,
    id: MailServerId,
    input: MailServerInput,
) -> Result<SavedMailServer, AppError> {
    save(services, member, id, input, Mode::Update)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Create,
    Update,
}

fn save(
    services: &Services,
    member: &Member,
    id: MailServerId,
    input: MailServerInput,
    mode: Mode,
) -> Result<SavedMailServer, AppError> {
    let account = member.account();
    let settings = input.parse()?;
    // Refuse unknown servers (non-members never get a `Member`) before touching the network, so the check
    // cannot be used to probe hosts.
    let refuses_clear_text_auth = in_transaction(services.db.as_ref(), |tx| {
        if mode == Mode::Update && tx.find_mail_server(account, id)?.is_none() {
            return Err(AppError::NotFound);
        }
        check_sender(
            tx,
            account,
            "defaultFromEmail",
            settings.default_from_email.as_str(),
        )?;
        Ok(tx
            .find_account(account)?
            .is_some_and(|record| record.refuse_clear_text_auth))
    })?;
    let check = services
        .mail_server_probe
        .verify(&endpoint(&settings, refuses_clear_text_auth))
        .map_err(probe_error)?;
    let now = services.clock.now();
    let sealed = services
        .secrets
        .seal(&settings.password, &password_slot(account, id));
    in_transaction(services.db.as_ref(), |tx| {
        let created_at = match mode {
            Mode::Create => now,
            Mode::Update => {
                tx.find_mail_server(account, id)?
                    .ok_or(AppError::NotFound)?
                    .server
                    .created_at
            }
        };
        let record = MailServerRecord {
            server: MailServer {
                id,
                service_type: settings.service_type.clone(),
                host: settings.host.clone(),
                port: settings.port,
                secure: settings.secure,
                require_tls: settings.require_tls,
                allow_insecure_tls: settings.allow_insecure_tls,
                user: settings.user.clone(),
                default_from_email: settings.default_from_email.as_str().to_owned(),
                default_from_name: settings.default_from_name.clone(),
                created_at,
                updated_at: now,
                // Saving checked the settings: whatever made the server unhealthy is
                // settled or will show again.
                unhealthy: None,
            },
            password: sealed.clone(),
        };
        match mode {
            Mode::Create => tx.insert_mail_server(account, &record)?,
            Mode::Update => {
                if !tx.update_mail_server(account, &record)? {
                    return Err(AppError::NotFound);
                }
            }
        }
        let warnings = match check {
            CredentialCheck::Authenticated => Vec::new(),
            CredentialCheck::AuthenticatedInClear => vec![CLEAR_TEXT_WARNING.to_owned()],
            CredentialCheck::NoAuthAdvertised => vec![NO_AUTH_WARNING.to_owned()],
        };
        Ok(SavedMailServer {
            server: record.server,
            warnings,
            credentials_sent_in_clear: check == CredentialCheck::AuthenticatedInClear,
        })
    })
}

/// How a connection to a mail server is secured; the one place this rule lives, for the
/// check on save and for delivery. `secure` wins over `requireTLS`: implicit TLS is
/// already encrypted, so there is nothing to upgrade. A server with a user of an account
/// that refuses clear-text authentication needs STARTTLS as if `requireTLS` were on, so
/// its password never crosses a plain connection.
pub(crate) fn connection_security(
    secure: bool,
    require_tls: bool,
    has_user: bool,
    refuses_clear_text_auth: bool,
) -> SmtpSecurity {
    if secure {
        SmtpSecurity::ImplicitTls
    } else if require_tls || (has_user && refuses_clear_text_auth) {
        SmtpSecurity::StartTlsRequired
    } else {
        SmtpSecurity::StartTlsOpportunistic
    }
}

/// The connection the settings describe, for the check on save.
pub(crate) fn endpoint(
    settings: &MailServerSettings,
    refuses_clear_text_auth: bool,
) -> SmtpEndpoint {
    let security = connection_security(
        settings.secure,
        settings.require_tls,
        !settings.user.is_empty(),
        refuses_clear_text_auth,
    );
    SmtpEndpoint {
        host: settings.host.as_str().to_owned(),
        port: settings.port,
        security,
        allow_insecure_tls: settings.allow_insecure_tls,
        user: settings.user.clone(),
        password: settings.password.clone(),
        saved: None,
    }
}

/// Every check failure is the client's to fix: a 400 naming the field most likely at fault.
fn probe_error(error: ProbeError) -> AppError {
    let field = match &error {
        ProbeError::AuthRefused(_) => "password",
        ProbeError::Tls(_) => "secure",
        ProbeError::EgressRefused(_)
        | ProbeError::Resolve(_)
        | ProbeError::Connect(_)
        | ProbeError::Protocol(_)
        | ProbeError::Timeout(_) => "host",
    };
    AppError::Invalid(ValidationErrors::single(field, error.to_string()))
}
