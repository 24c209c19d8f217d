//! `/docs`: the interactive API reference. Its script and stylesheet are
//! vendored (vendor/swagger-ui, with their licence) and embedded in the
//! binary, so the page works behind a firewall with no internet access.

use actix_web::http::header;
use actix_web::{web, HttpResponse};

const BUNDLE_JS: &[u8] = include_bytes!("../../vendor/swagger-ui/swagger-ui-bundle.js");
const UI_CSS: &[u8] = include_bytes!("../../vendor/swagger-ui/swagger-ui.css");
const LICENSE: &[u8] = include_bytes!("../../vendor/swagger-ui/LICENSE");

/// The page: every asset from this server, the document from the API, and
/// the online validator badge switched off (it would call out).
const PAGE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Pharmacy operations API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({
  url: "/api/v1/openapi.json",
  dom_id: "#ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout"
});
</script>
</body>
</html>
"##;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/docs", web::get().to(page))
        .route("/docs/", web::get().to(page))
        .route("/docs/swagger-ui-bundle.js", web::get().to(bundle))
        .route("/docs/swagger-ui.css", web::get().to(stylesheet))
        .route("/docs/LICENSE", web::get().to(licence));
}

/// The page may not be framed by another site (clickjacking).
async fn page() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::CONTENT_SECURITY_POLICY, "frame-ancestors 'none'"))
        .body(PAGE)
}

async fn bundle() -> HttpResponse {
    asset("text/javascript; charset=utf-8", BUNDLE_JS)
}

async fn stylesheet() -> HttpResponse {
    asset("text/css; charset=utf-8", UI_CSS)
}

async fn licence() -> HttpResponse {
    asset("text/plain; charset=utf-8", LICENSE)
}

/// Assets change only with the binary: a day's caching is safe.
fn asset(content_type: &'static str, body: &'static [u8]) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CACHE_CONTROL, "public, max-age=86400"))
        .body(body)
}
