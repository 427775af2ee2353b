use mailroom_domain::{email::EmailAddress, message::Message, ContactId, TemplateId};

use crate::{
    auth::Member,
    messages::outbox::{queued_message, sender_domain, Addressee, Origin},
    ports::in_transaction,
    rendering::SendData,
    AppError, Services,
};

/// Queues one test send of a template: `POST …/templates/{templateId}/test-send`.
///
/// A test send is an ordinary transactional message (docs/api-decisions.md, "Test sends"):
/// it goes through the normal pipeline (suppression, send limit, rendering in the
/// sandbox, the chosen server, retries), appears in the message log and counts in the
/// stats, marked `test`. The template is named by id, so templates can be tried before
/// anything sends them by slug. A test neither makes nor changes a contact: to an
/// address of a contact it renders with that contact's attributes (and does not count in
/// its `message_count`); to any other address it names a contact id that no contact has,
/// and the claim addresses it to the message's own address.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown template; [`AppError`] when the store fails.
pub fn test_send(
    services: &Services,
    member: &Member,
    template: TemplateId,
    email: &EmailAddress,
    data: SendData,
) -> Result<Message, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let now = services.clock.now();
        let found = tx
            .find_template(account, template)?
            .ok_or(AppError::NotFound)?;
        let (contact_id, contact_email) = match tx.find_contact_by_email(account, email)? {
            Some(contact) => (contact.id, contact.email),
            None => (
                ContactId::from_uuid(services.ids.next_uuid()),
                email.as_str().to_owned(),
            ),
        };
        let domain = sender_domain(tx, account, &found)?;
        let mut message = queued_message(
            services,
            account,
            &found,
            &domain,
            &Addressee {
                contact: contact_id,
                email: &contact_email,
            },
            Origin::Transactional,
            data.clone(),
            now,
            now,
        );
        message.test = true;
        tx.insert_message(&message, None)?;
        Ok(message)
    })
}
