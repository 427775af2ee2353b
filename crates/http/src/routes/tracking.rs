//! The public tracking endpoints, outside `/v2` and without authentication: the token in
//! the path is the only credential (docs/design.md#8-delivery, Tracking). A link that
//! cannot be followed answers a browser with a page (`link_error`).

use actix_web::{
    get,
    http::header::{self, HeaderValue},
    web, HttpRequest, HttpResponse,
};
use mailroom_app::{tracking, Services};

use super::link_error::link_error;
use crate::{blocking::run_blocking, pages::PageTemplates, problem::ApiError};

/// A transparent 1×1 GIF89a (43 bytes).
pub const PIXEL_GIF: [u8; 43] = [
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// The open pixel. Always answers the GIF, also for a token the server did not mint
/// (then nothing is recorded), and also when recording fails (logged): a mail client is
/// never shown a broken image. The first open of a message counts `opened`.
#[utoipa::path(
    tag = "links",
    params(("token" = String, Path, description = "Open token from the message's pixel URL")),
    responses((status = 200, content_type = "image/gif", description = "A transparent 1×1 GIF, `Cache-Control: no-store`"))
)]
#[get("/t/o/{token}")]
pub(crate) async fn open_pixel(
    services: web::Data<Services>,
    token: web::Path<String>,
) -> HttpResponse {
    let token = token.into_inner();
    if let Err(error) = run_blocking(move || tracking::record_open(&services, &token)).await {
        tracing::warn!(%error, "an open could not be recorded");
    }
    HttpResponse::Ok()
        .content_type("image/gif")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(PIXEL_GIF.as_slice())
}

/// A tracked link: 302 to the link stored with the message at the token's position (the
/// target never comes from the request). The first click of a message counts `clicked`.
#[utoipa::path(
    tag = "links",
    params(("token" = String, Path, description = "Click token from a rewritten link")),
    responses(
        (status = 302, description = "`Location` is the stored link"),
        (status = 404, body = crate::problem::Problem, description = "The token was not minted here, or its message or link is gone (a browser, whose `Accept` prefers HTML, gets a page)"),
    )
)]
#[get("/t/c/{token}")]
pub(crate) async fn follow_link(
    services: web::Data<Services>,
    pages: web::Data<PageTemplates>,
    token: web::Path<String>,
    request: HttpRequest,
) -> HttpResponse {
    let token = token.into_inner();
    let location = run_blocking(move || tracking::follow_click(&services, &token))
        .await
        .and_then(|link| {
            HeaderValue::from_str(&location(&link)).map_err(|_| ApiError::not_found())
        });
    match location {
        Ok(location) => HttpResponse::Found()
            .insert_header((header::LOCATION, location))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .insert_header((header::REFERRER_POLICY, "no-referrer"))
            .finish(),
        Err(error) => link_error(&pages, &request, &error),
    }
}

/// The stored link as a header value: bytes a header cannot carry (controls, space,
/// non-ASCII) are percent-encoded, as a browser would before following the link.
fn location(link: &str) -> String {
    let mut out = String::with_capacity(link.len());
    for byte in link.bytes() {
        if byte.is_ascii_graphic() {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_carry_only_visible_ascii() {
        assert_eq!(
            location("https://shop.example/a?x=1&y=2#top"),
            "https://shop.example/a?x=1&y=2#top"
        );
        assert_eq!(
            location("https://shop.example/é b\r\n"),
            "https://shop.example/%C3%A9%20b%0D%0A"
        );
    }

    #[test]
    fn the_pixel_is_a_one_by_one_gif() {
        assert_eq!(&PIXEL_GIF[..6], b"GIF89a");
        assert_eq!(&PIXEL_GIF[6..10], &[1, 0, 1, 0], "width and height 1");
        assert_eq!(PIXEL_GIF[PIXEL_GIF.len() - 1], 0x3b, "trailer");
    }
}
