//! `GET /`: the status page, one static HTML document (`page.html`, compiled in): its styles
//! and script inline, no external resource, no build step — it works offline and behind any
//! prefix (it finds `tools` and `events` relative to its own address).
//!
//! Everything the page shows from the server is set as text (`textContent`, attribute values),
//! never parsed as markup: a tool name is never HTML. The response's Content-Security-Policy
//! allows the inline script and styles and connections to this origin only, so even a bug
//! there could not load or send anything elsewhere.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

/// The page.
pub(super) const PAGE: &str = include_str!("page.html");

/// The page's security policy: its own inline script and styles, requests to its origin,
/// inline SVG images; nothing else (no frames, forms, plugins, base changes).
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                   connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

pub(super) fn response() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        PAGE,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::PAGE;

    #[test]
    fn the_page_is_self_contained_and_never_parses_server_text_as_markup() {
        // The SVG namespace is a name, not an address anything is loaded from.
        let page = PAGE.replace("'http://www.w3.org/2000/svg'", "");
        for external in ["http://", "https://", "//cdn", "<link", "src=\"", "import("] {
            assert!(
                !page.contains(external),
                "the page loads nothing: found {external:?}"
            );
        }
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(
                !PAGE.contains(sink),
                "no markup sink in the page: found {sink:?}"
            );
        }
    }
}
