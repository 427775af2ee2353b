use mailroom_domain::{
    attribute::ResolvedAttributes,
    condition::{
        check_condition_count,
        engagement::{Engagement, EngagementScope},
        parse_conditions, AudienceDefinition, Condition, ConditionInput, Segment,
    },
    contact::Contact,
    paging::PageRequest,
    AccountId, ContactId, Timestamp, TopicId,
};

use super::AccountAttributeTypes;
use crate::{
    auth::Member,
    ports::{in_transaction, UnitOfWork},
    AppError, Services,
};

/// The raw body of `POST …/contacts/search`.
#[derive(Debug, Clone, Default)]
pub struct SearchRequest {
    /// Conditions combined with AND.
    pub attributes: Vec<ConditionInput>,
    /// Whether unsubscribed contacts are included (required by the API).
    pub include_unsubscribed: bool,
    /// Exclude contacts unsubscribed from this topic.
    pub topic: Option<TopicId>,
    /// Keyset paging: only contacts with an id greater than this one.
    pub after: Option<ContactId>,
}

impl SearchRequest {
    /// The search of everyone in `definition` (a saved segment's, say), from the start.
    pub fn of(definition: &AudienceDefinition) -> Self {
        Self {
            attributes: definition.attributes.clone(),
            include_unsubscribed: definition.include_unsubscribed,
            topic: definition.topic,
            after: None,
        }
    }

    /// The audience this search describes, paging left out.
    pub fn definition(&self) -> AudienceDefinition {
        AudienceDefinition {
            attributes: self.attributes.clone(),
            include_unsubscribed: self.include_unsubscribed,
            topic: self.topic,
        }
    }
}

/// The one check of an audience definition, which search, count and saved segments
/// share: the conditions' number, the topic is the account's, each condition fits the
/// account's attributes, and an engagement condition's announcement or template is the
/// account's. Engagement windows end at `as_of`.
///
/// # Errors
/// [`AppError::Invalid`] naming `attributes`, `topicId` or `attributes[i].…`.
pub(crate) fn audience_segment(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    request: &SearchRequest,
    as_of: Timestamp,
) -> Result<Segment, AppError> {
    check_condition_count(&request.attributes)?;
    if let Some(topic) = request.topic {
        if tx.find_topic(account, topic)?.is_none() {
            return Err(AppError::invalid(
                "topicId",
                "must be the id of a topic of this account",
            ));
        }
    }
    let types = AccountAttributeTypes::load(tx, account)?;
    let conditions = parse_conditions(&request.attributes, &types, as_of)?;
    for (index, condition) in conditions.iter().enumerate() {
        let Condition::Engagement(Engagement { scope, .. }) = condition else {
            continue;
        };
        let (known, what) = match *scope {
            EngagementScope::AnyMessage => continue,
            EngagementScope::Announcement(id) => (
                tx.find_announcement(account, id)?.is_some(),
                "announcementId must be the id of an announcement of this account",
            ),
            EngagementScope::Template(id) => (
                tx.find_template(account, id)?.is_some(),
                "templateId must be the id of a template of this account",
            ),
        };
        if !known {
            return Err(AppError::invalid(
                &format!("attributes[{index}].value"),
                what,
            ));
        }
    }
    Ok(Segment {
        conditions,
        include_unsubscribed: request.include_unsubscribed,
        topic: request.topic,
    })
}

/// One page of the contacts matching the audience filter, with resolved attributes, in id
/// order.
///
/// # Errors
/// [`AppError::Invalid`] for unknown slugs, operator/type mismatches and bad values;
/// [`AppError`] when the store fails.
pub fn search_contacts(
    services: &Services,
    member: &Member,
    request: &SearchRequest,
    page: PageRequest,
) -> Result<Vec<(Contact, ResolvedAttributes)>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let segment = audience_segment(tx, account, request, services.clock.now())?;
        let ids = tx.search_segment(account, &segment, page, request.after)?;
        let contacts = tx.find_contacts(account, &ids)?;
        let mut attributes = super::resolve_attributes(tx, account, &contacts)?;
        Ok(contacts
            .into_iter()
            .map(|contact| {
                let resolved = attributes.remove(&contact.id).unwrap_or_default();
                (contact, resolved)
            })
            .collect())
    })
}

/// How many contacts match the audience filter.
///
/// # Errors
/// As [`search_contacts`].
pub fn count_search(
    services: &Services,
    member: &Member,
    request: &SearchRequest,
) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let segment = audience_segment(tx, account, request, services.clock.now())?;
        Ok(tx.count_segment(account, &segment)?)
    })
}
