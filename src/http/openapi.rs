//! The OpenAPI 3.1 document, generated from the handlers' annotations, and
//! the interactive docs page. The paths come from the routes as they are
//! registered (see `http::configure_documented`); this module adds the
//! info, tags, security scheme and common answers.

use actix_web::{web, HttpResponse};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_actix_web::service_config::ServiceConfig;
use utoipa_actix_web::AppExt;

use crate::http;

mod contract;
mod rules;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Pharmacy Operations Service API",
        description = "Multi-branch pharmacy back-office: stock, sales, customers, suppliers, sync for tills, reports and compliance. Errors are RFC 9457 problem details.",
    ),
    components(schemas(domain::error::Problem, domain::Role)),
    tags(
        (name = "auth", description = "Sign-in and tokens"),
        (name = "branches", description = "Branches of the chain"),
        (name = "users", description = "Staff accounts"),
        (name = "sessions", description = "Cash sessions"),
        (name = "coupons", description = "Discount coupons"),
        (name = "stock", description = "Stock counts"),
        (name = "transfers", description = "Stock transfers between branches"),
        (name = "supplier-finance", description = "Batch quarantine and reorder suggestions"),
        (name = "medicines", description = "The medicine catalogue"),
        (name = "purchases", description = "Receiving stock"),
        (name = "buying", description = "Purchase orders, goods received, supplier returns"),
        (name = "customers", description = "Customers, credit and payments"),
        (name = "suppliers", description = "The supplier directory"),
        (name = "sales", description = "Sales and the invoice chain"),
        (name = "operations", description = "Health and metrics"),
        (name = "sync", description = "Sync for tills: snapshot, change feed, push and conflicts"),
        (name = "printing", description = "Printers, receipt templates and the print-job log"),
        (name = "settings", description = "The organisation settings record"),
        (name = "currency", description = "Currency registry, exchange rates and the branch currency"),
        (name = "audit", description = "The audit log"),
        (name = "prescriptions", description = "The branch's prescriptions: dispense and cancel"),
        (name = "dispensing", description = "Will-call pickups waiting at the counter"),
        (name = "approvals", description = "Manager approvals"),
        (name = "marketing", description = "Public enquiries (no token)"),
        (name = "devices", description = "Tills: registration and revocation"),
        (name = "compliance", description = "The books an inspector reads"),
        (name = "dashboard", description = "Today's figures and the branch comparison"),
        (name = "reports", description = "Sales, pharmacists, inventory, purchases and VAT"),
        (name = "ops", description = "Live actors and per-branch mailbox tuning (admin)"),
        (name = "fiscal", description = "Fiscal documents for the tax authority (EFRIS)"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

/// Documents the answers every route of a kind can give, whatever its
/// handler, where the route does not declare them itself: 400 for a
/// malformed query or body, 401 without a valid token, 403 when the
/// caller's role or branch may not do it, 404 for a path id that names
/// nothing, 409 when a write meets a state that does not allow it, 413 for an
/// oversized body, 429 over a rate limit and 503 while the database is
/// unreachable or too slow. Each is an `application/problem+json` body
/// (`Problem`); 429 and 503 carry `Retry-After`. Every response gets a
/// description (utoipa leaves the undescribed ones empty).
struct CommonResponses;

/// The standard description of a status.
fn status_description(status: &str) -> &'static str {
    match status {
        "200" => "OK.",
        "201" => "Created.",
        "204" => "Done; no body.",
        "400" => "The request is malformed or a value is invalid; `field` names the offending field where there is one.",
        "401" => "No valid access token.",
        "403" => "The caller's role or branch does not allow this.",
        "404" => "The id names nothing (a malformed id included).",
        "409" => "The record's state does not allow this, or a unique value is taken.",
        "413" => "The body is larger than the limit.",
        "429" => "Too many requests; retry after `Retry-After` seconds.",
        "503" => "The database is unreachable or too slow, or the service is busy; retry after `Retry-After` seconds.",
        _ => "See the problem body.",
    }
}

impl Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::header::HeaderBuilder;
        use utoipa::openapi::path::ParameterIn;
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};

        let problem = |status: &str| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(status_description(status))
                    .content(
                        domain::error::PROBLEM_JSON,
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("Problem")))
                            .build(),
                    )
                    .build(),
            )
        };
        let retry_after = HeaderBuilder::new()
            .schema(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0)),
            )
            .description(Some("Seconds to wait before retrying."))
            .build();
        for (path, item) in openapi.paths.paths.iter_mut() {
            let needs_database = !matches!(path.as_str(), "/healthz" | "/metrics");
            let api = path.starts_with("/api/");
            for (method, op) in contract::operations_mut(item) {
                let params = op.parameters.as_deref().unwrap_or_default();
                let has_path = params
                    .iter()
                    .any(|p| matches!(p.parameter_in, ParameterIn::Path));
                let has_query = params
                    .iter()
                    .any(|p| matches!(p.parameter_in, ParameterIn::Query));
                let has_body = op.request_body.is_some();
                let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
                let write = method != "get";
                let mut add = |status: &str| {
                    op.responses
                        .responses
                        .entry(status.to_owned())
                        .or_insert_with(|| problem(status));
                };
                if has_query || has_body {
                    add("400");
                }
                if secured {
                    add("401");
                    add("403");
                }
                if has_path {
                    add("404");
                }
                if secured && write {
                    add("409");
                }
                if has_body {
                    add("413");
                }
                if api {
                    add("429");
                }
                if needs_database {
                    add("503");
                }
                for (status, response) in op.responses.responses.iter_mut() {
                    let RefOr::T(response) = response else {
                        continue;
                    };
                    if response.description.trim().is_empty() {
                        response.description = status_description(status).to_owned();
                    }
                    if matches!(status.as_str(), "429" | "503") {
                        response
                            .headers
                            .entry("Retry-After".to_owned())
                            .or_insert_with(|| retry_after.clone());
                    }
                }
            }
        }
    }
}

/// The methods the document lists for a concrete request path, for the
/// `Allow` header of a 405 (RFC 9110).
pub fn allowed_methods(path: &str) -> Option<String> {
    static TABLE: std::sync::LazyLock<Vec<(Vec<String>, String)>> =
        std::sync::LazyLock::new(|| {
            document()
                .paths
                .paths
                .iter()
                .map(|(template, item)| {
                    let segments = template.split('/').map(str::to_owned).collect();
                    let methods: Vec<&str> = [
                        ("GET", item.get.is_some()),
                        ("PUT", item.put.is_some()),
                        ("POST", item.post.is_some()),
                        ("DELETE", item.delete.is_some()),
                        ("PATCH", item.patch.is_some()),
                    ]
                    .into_iter()
                    .filter_map(|(m, present)| present.then_some(m))
                    .collect();
                    (segments, methods.join(", "))
                })
                .collect()
        });
    let wanted: Vec<&str> = path.split('/').collect();
    // A literal segment beats a parameter: `/purchase-orders/from-reorder`
    // is that path, not `/purchase-orders/{id}`.
    TABLE
        .iter()
        .filter(|(segments, _)| {
            segments.len() == wanted.len()
                && segments.iter().zip(&wanted).all(|(t, w)| {
                    (t.starts_with('{') && t.ends_with('}') && !w.is_empty()) || t == w
                })
        })
        .max_by_key(|(segments, _)| segments.iter().filter(|t| !t.starts_with('{')).count())
        .map(|(_, methods)| methods.clone())
}

/// The annotations' document: [`ApiDoc`] (info, tags, shared schemas) with
/// the paths and schemas of every route registered by
/// `http::configure_documented`, then the security scheme, the common
/// answers and the request rules.
pub fn annotated() -> utoipa::openapi::OpenApi {
    let (_, mut doc) = actix_web::App::new()
        .into_utoipa_app()
        .openapi(ApiDoc::openapi())
        .configure(http::configure_documented)
        .split_for_parts();
    BearerAuth.modify(&mut doc);
    CommonResponses.modify(&mut doc);
    rules::RequestRules.modify(&mut doc);
    doc
}

/// The served document: the annotations' document, then one readable,
/// unique `operationId` per operation (derived from the route), one-line
/// summaries, optional bodies as such, and examples on the money and date
/// fields.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = annotated();
    contract::assign_operation_ids(&mut doc);
    contract::tidy_summaries(&mut doc);
    contract::optional_bodies(&mut doc);
    contract::money_and_date_examples(&mut doc);
    doc
}

/// `/openapi.json` itself, not listed in the document.
pub fn configure_api(cfg: &mut ServiceConfig) {
    cfg.route("/openapi.json", web::get().to(openapi_json));
}

async fn openapi_json() -> HttpResponse {
    static DOC: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| document().to_json().unwrap_or_else(|_| "{}".to_owned()));
    HttpResponse::Ok()
        .content_type("application/json")
        .body(DOC.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation has a unique camelCase id and a one-line summary
    /// (from its handler's doc comment), and no two routes derive the same
    /// id (a clash would fall back to a long id naming the whole path: give
    /// one of them an entry in `contract::NAMED`).
    #[test]
    fn every_operation_has_a_unique_readable_id_and_a_summary() {
        let mut raw = annotated();
        let clashes = contract::assign_operation_ids(&mut raw);
        assert!(
            clashes.is_empty(),
            "derived ids shared by two routes: {clashes:?}"
        );

        let mut doc = document();
        let mut seen = std::collections::BTreeSet::new();
        let mut problems = Vec::new();
        for (path, item) in doc.paths.paths.iter_mut() {
            for (method, op) in contract::operations_mut(item) {
                let id = op.operation_id.clone().unwrap_or_default();
                let readable = id.len() <= 40
                    && id.starts_with(|c: char| c.is_ascii_lowercase())
                    && id.chars().all(|c| c.is_ascii_alphanumeric());
                if !readable {
                    problems.push(format!("{method} {path}: id {id:?} is not camelCase"));
                }
                if !seen.insert(id.clone()) {
                    problems.push(format!("{method} {path}: id {id:?} is used twice"));
                }
                match op.summary.as_deref() {
                    Some(s) if !s.trim().is_empty() && !s.contains('\n') => {}
                    other => problems.push(format!(
                        "{method} {path}: summary {other:?} (give the handler a doc comment)"
                    )),
                }
            }
        }
        assert!(seen.len() > 100, "{} operations", seen.len());
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
