//! Corrections applied to the generated OpenAPI document after utoipa has built it.

use utoipa::openapi::{OpenApi, RefOr};

use crate::problem::PROBLEM_JSON;

/// The schema reference utoipa writes for `body = Problem`.
const PROBLEM_REF: &str = "#/components/schemas/Problem";

/// Documents every error answer under the media type it is really sent with.
///
/// `#[utoipa::path(responses((status = 400, body = Problem)))]` documents the body as
/// `application/json`, but [`crate::problem::ApiError`] answers
/// `application/problem+json` (RFC 9457). Rewriting here, once, keeps the ~200 response
/// annotations short and cannot miss one; schemathesis' `content_type_conformance`
/// check found the mismatch.
pub fn document_problem_media_type(api: &mut OpenApi) {
    for item in api.paths.paths.values_mut() {
        let operations = [
            item.get.as_mut(),
            item.put.as_mut(),
            item.post.as_mut(),
            item.delete.as_mut(),
            item.patch.as_mut(),
        ];
        for operation in operations.into_iter().flatten() {
            for response in operation.responses.responses.values_mut() {
                let RefOr::T(response) = response else {
                    continue;
                };
                response.content = std::mem::take(&mut response.content)
                    .into_iter()
                    .map(|(media_type, content)| {
                        let is_problem = matches!(
                            &content.schema,
                            Some(RefOr::Ref(reference)) if reference.ref_location == PROBLEM_REF
                        );
                        if is_problem && media_type == "application/json" {
                            (PROBLEM_JSON.to_owned(), content)
                        } else {
                            (media_type, content)
                        }
                    })
                    .collect();
            }
        }
    }
}
