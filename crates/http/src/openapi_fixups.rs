//! Corrections applied to the generated OpenAPI document after utoipa has built it.

use utoipa::openapi::{path::ParameterIn, schema::ObjectBuilder, OpenApi, RefOr, Schema, Type};

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
        for operation in operations(item) {
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

/// Documents the `limit` query parameter of the lists as what it is: any whole number
/// of at least 1; larger than 100 is clamped to 100, not refused (api-v2.md, "limit
/// maximum"), however many digits it has.
///
/// The annotations say `Option<u32>`, which utoipa renders as `format: int32, minimum: 0`:
/// that documented 0 as valid (it is refused with 400) and 2^31 as invalid (it is
/// accepted and clamped); schemathesis reported both.
pub fn document_limit_as_clamped(api: &mut OpenApi) {
    for item in api.paths.paths.values_mut() {
        for operation in operations(item) {
            let parameters = operation.parameters.iter_mut().flatten();
            for parameter in parameters.filter(|parameter| {
                parameter.name == "limit" && matches!(parameter.parameter_in, ParameterIn::Query)
            }) {
                parameter.schema = Some(RefOr::T(Schema::Object(
                    ObjectBuilder::new()
                        .schema_type(Type::Integer)
                        .minimum(Some(1))
                        .build(),
                )));
            }
        }
    }
}

fn operations(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        item.get.as_mut(),
        item.put.as_mut(),
        item.post.as_mut(),
        item.delete.as_mut(),
        item.patch.as_mut(),
    ]
    .into_iter()
    .flatten()
}
