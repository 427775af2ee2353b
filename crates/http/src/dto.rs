//! JSON shapes shared by every resource: the page envelope and the count. Each
//! resource's own shapes live beside its handlers (`routes/<resource>_dto.rs`).

use serde::Serialize;
use utoipa::ToSchema;

/// A page of results.
#[derive(Debug, Serialize, ToSchema)]
pub struct PageEnvelope<T: ToSchema> {
    /// The items of this page.
    pub items: Vec<T>,
    /// Offset of the first item, echoing the request.
    pub start: u64,
    /// Page size after clamping.
    pub limit: u32,
}

impl<T: ToSchema> PageEnvelope<T> {
    /// A whole, unpaged list in one envelope (tokens, accounts, members).
    pub fn whole(items: Vec<T>) -> Self {
        let limit = u32::try_from(items.len()).unwrap_or(u32::MAX);
        Self {
            items,
            start: 0,
            limit,
        }
    }

    /// One page, echoing the request after clamping.
    pub fn page(items: Vec<T>, page: mailroom_domain::paging::PageRequest) -> Self {
        Self {
            items,
            start: page.start,
            limit: page.limit,
        }
    }
}

/// The answer of every `/count` companion.
#[derive(Debug, Serialize, ToSchema)]
pub struct CountDto {
    /// How many records match.
    pub count: u64,
}
