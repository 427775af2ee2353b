//! Paged lists: one page at a time ([`Page`], [`PageRequest`]), or every item as a
//! [`Stream`] that walks `start`/`limit` until a short page.
//!
//! A list is read oldest first. Items created while a stream walks may appear in a later
//! page; none that existed when the stream began is skipped, because `start` advances by
//! the number of items actually read.

use std::future::Future;

use futures_util::stream::{self, Stream, TryStreamExt};
use serde::Deserialize;

use crate::error::Result;

/// The most items the server returns per page (larger limits are lowered to this).
pub const MAX_PAGE_SIZE: u32 = 100;

/// Which page to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    /// Items to skip (0 or more).
    pub start: u64,
    /// Items to return (1 to 100).
    pub limit: u32,
}

impl PageRequest {
    /// The page at `start` with `limit` items.
    pub fn new(start: u64, limit: u32) -> Self {
        Self { start, limit }
    }

    pub(crate) fn query(&self) -> [(&'static str, String); 2] {
        [
            ("start", self.start.to_string()),
            ("limit", self.limit.to_string()),
        ]
    }
}

impl Default for PageRequest {
    /// The server's default: the first 25 items.
    fn default() -> Self {
        Self {
            start: 0,
            limit: 25,
        }
    }
}

/// One page of a list, or a short list that comes whole (accounts, members, tokens, event
/// names).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// The `start` the server applied.
    pub start: u64,
    /// The `limit` the server applied (after lowering it to 100).
    pub limit: u32,
}

/// Every item of a paged list: reads pages of `page_size` with `fetch` until a page comes
/// back shorter than its limit, yielding items as they arrive. The first error ends the
/// stream.
pub(crate) fn walk<T, F, Fut>(page_size: u32, fetch: F) -> impl Stream<Item = Result<T>>
where
    F: FnMut(PageRequest) -> Fut,
    Fut: Future<Output = Result<Page<T>>>,
{
    let pages = stream::try_unfold((Some(0u64), fetch), move |(next, mut fetch)| async move {
        let Some(start) = next else {
            return Ok(None);
        };
        let page = fetch(PageRequest::new(start, page_size)).await?;
        let read = page.items.len();
        let last = read == 0 || read < page.limit as usize;
        let next = (!last).then(|| start + read as u64);
        Ok(Some((page.items, (next, fetch))))
    });
    pages
        .map_ok(|items| stream::iter(items.into_iter().map(Ok)))
        .try_flatten()
}
