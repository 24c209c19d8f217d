//! The OpenAPI 3.1 document, generated from the handlers' annotations, and
//! the interactive docs page.

use actix_web::{web, HttpResponse};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::http;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Pharmacy Operations Service API",
        description = "Multi-branch pharmacy back-office: stock, sales, customers, suppliers, sync for tills, reports and compliance. Errors are RFC 9457 problem details.",
    ),
    paths(
        http::auth::login, http::auth::refresh, http::auth::me, http::auth::logout,
        http::auth::change_password,
        http::branches::list, http::branches::get, http::branches::create,
        http::branches::update, http::branches::delete,
        http::users::list, http::users::get, http::users::create, http::users::update,
        http::users::delete,
        http::sessions::open, http::sessions::current, http::sessions::close,
        http::medicines::list, http::medicines::get, http::medicines::create,
        http::medicines::update, http::medicines::delete,
        http::purchases::create,
        http::customers::list, http::customers::get, http::customers::create,
        http::customers::update, http::customers::delete, http::customers::ledger,
        http::customers::pay,
        http::suppliers::list, http::suppliers::get, http::suppliers::create,
        http::suppliers::update, http::suppliers::delete,
        http::sales::create, http::sales::list, http::sales::get, http::sales::verify_chain,
        http::coupons::create, http::coupons::list,
        http::stockcount::submit,
        http::transfers::create, http::transfers::list, http::transfers::get,
        http::transfers::receive, http::transfers::cancel,
        http::supplier_finance::quarantine, http::supplier_finance::reorder_suggestions,
        http::supplier_finance::create_invoice, http::supplier_finance::list_invoices,
        http::supplier_finance::pay_invoice,
        http::health::healthz, http::health::readyz, http::health::metrics,
        http::sync::push::push, http::sync::conflicts::list, http::sync::conflicts::resolve,
        http::printing::list_printers, http::printing::create_printer,
        http::printing::update_printer, http::printing::delete_printer,
        http::printing::list_templates, http::printing::create_template,
        http::printing::update_template, http::printing::delete_template,
        http::printing::log_job, http::printing::list_jobs,
        http::settings::get, http::settings::update,
        http::currency::list, http::currency::file_rate, http::currency::branch,
        http::audit_log::list,
        http::prescriptions::create, http::prescriptions::list, http::prescriptions::get,
        http::prescriptions::dispense, http::prescriptions::cancel, http::prescriptions::delete,
        http::dispensing::create, http::dispensing::list, http::dispensing::pickup,
        http::dispensing::cancel,
        http::approvals::create, http::approvals::list, http::approvals::approve,
        http::approvals::reject,
        http::marketing::contact,
        http::devices::create, http::devices::revoke,
        http::compliance::devices,
        http::compliance::prescription_book, http::compliance::classified_drugs_book,
        http::compliance::fiscal_preview,
        http::sync::pull::snapshot, http::sync::pull::changes,
        http::dashboard::summary, http::dashboard::branch_comparison,
        http::reports::sales, http::reports::by_pharmacist, http::reports::inventory,
        http::reports::purchases, http::reports::vat,
        http::ops::list, http::ops::get_branch, http::ops::put_branch, http::ops::delete_branch,
    ),
    components(schemas(actors::error::Problem, actors::Role)),
    modifiers(&BearerAuth, &CommonResponses, &RequestRules),
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
/// handler: 400 for a malformed query or body, 401 without a valid token,
/// 404 for a path id that names nothing, 413 for an oversized body and 503
/// while the database is unreachable or too slow. Each is a problem body.
struct CommonResponses;

impl Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::ParameterIn;
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};

        let problem = |description: &str| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        actors::error::PROBLEM_JSON,
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("Problem")))
                            .build(),
                    )
                    .build(),
            )
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            let needs_database = !matches!(path.as_str(), "/healthz" | "/metrics");
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                let params = op.parameters.as_deref().unwrap_or_default();
                let has_path = params
                    .iter()
                    .any(|p| matches!(p.parameter_in, ParameterIn::Path));
                let has_query = params
                    .iter()
                    .any(|p| matches!(p.parameter_in, ParameterIn::Query));
                let has_body = op.request_body.is_some();
                let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
                let mut add = |status: &str, description: &str| {
                    op.responses
                        .responses
                        .entry(status.to_owned())
                        .or_insert_with(|| problem(description));
                };
                if has_query || has_body {
                    add("400", "The request is malformed or a value is invalid.");
                }
                if secured {
                    add("401", "No valid access token.");
                }
                if has_path {
                    add("404", "The id names nothing (a malformed id included).");
                }
                if has_body {
                    add("413", "The body is larger than the limit.");
                }
                if needs_database {
                    add(
                        "503",
                        "The database is unreachable or too slow, or the service is busy; retry after `Retry-After` seconds.",
                    );
                }
            }
        }
    }
}

/// Rules of request fields the handlers enforce that the derived schemas do
/// not state (found by fuzzing against the document): closed value lists,
/// non-blank names, list sizes, whole-unit quantities, amounts above zero,
/// and the fields a create needs where one struct serves create and update.
/// Each rule is no stricter than its handler; enumerations are written as
/// case-insensitive patterns where the handler trims and folds case.
struct RequestRules;

/// A pattern matching `words` in any case, surrounded by optional blanks.
fn any_case(words: &[&str]) -> String {
    let alternatives: Vec<String> = words
        .iter()
        .map(|w| {
            w.chars()
                .map(|c| {
                    if c.is_ascii_alphabetic() {
                        format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
                    } else {
                        c.to_string()
                    }
                })
                .collect()
        })
        .collect();
    format!("^\\s*({})\\s*$", alternatives.join("|"))
}

/// A pattern matching exactly `words`, surrounded by optional blanks.
fn trimmed(words: &[&str]) -> String {
    format!("^\\s*({})\\s*$", words.join("|"))
}

impl Modify for RequestRules {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use serde_json::{json, Value};

        const NON_BLANK: &str = "\\S";
        let rules: Vec<(&str, &str, Value)> = vec![
            (
                "SaleRequest",
                "payment_method",
                json!({"pattern": any_case(&["cash", "card", "mobile_money", "credit"])}),
            ),
            (
                "SaleRequest",
                "items",
                json!({"minItems": 1, "maxItems": 200}),
            ),
            (
                "SaleLineRequest",
                "quantity",
                json!({"type": "integer", "minimum": 1, "maximum": 1_000_000}),
            ),
            (
                "CountRequest",
                "items",
                json!({"minItems": 1, "maxItems": 2000}),
            ),
            (
                "PrescriptionCreate",
                "items",
                json!({"minItems": 1, "maxItems": 100}),
            ),
            (
                "PrescriptionCreate",
                "patient_name",
                json!({"pattern": NON_BLANK}),
            ),
            (
                "PrescriptionItemWrite",
                "quantity",
                json!({"type": "integer", "minimum": 1, "maximum": 1_000_000}),
            ),
            (
                "TransferCreate",
                "qty",
                json!({"type": "integer", "minimum": 1, "maximum": 1_000_000}),
            ),
            (
                "PurchaseRequest",
                "batch_number",
                json!({"pattern": NON_BLANK, "maxLength": 100}),
            ),
            ("ApprovalCreate", "kind", json!({"pattern": NON_BLANK})),
            (
                "WillCallCreate",
                "patient_name",
                json!({"pattern": NON_BLANK}),
            ),
            ("DeviceCreate", "name", json!({"pattern": NON_BLANK})),
            ("ContactRequest", "name", json!({"pattern": NON_BLANK})),
            ("ContactRequest", "message", json!({"pattern": NON_BLANK})),
            ("CouponCreate", "code", json!({"pattern": NON_BLANK})),
            (
                "CouponCreate",
                "discount_type",
                json!({"pattern": any_case(&["percentage", "fixed"])}),
            ),
            (
                "CouponCreate",
                "discount_value",
                json!({"exclusiveMinimum": 0}),
            ),
            ("CustomerWrite", "name", json!({"pattern": NON_BLANK})),
            ("MedicineWrite", "name", json!({"pattern": NON_BLANK})),
            ("SupplierWrite", "name", json!({"pattern": NON_BLANK})),
            ("PrinterWrite", "name", json!({"pattern": NON_BLANK})),
            (
                "PrinterWrite",
                "kind",
                json!({"pattern": trimmed(&["receipt_80mm", "receipt_58mm", "a4_invoice", "label", "report"])}),
            ),
            (
                "PrinterWrite",
                "connection",
                json!({"pattern": trimmed(&["browser"])}),
            ),
            ("TemplateWrite", "name", json!({"pattern": NON_BLANK})),
            (
                "QuarantineRequest",
                "status",
                json!({"pattern": any_case(&["quarantined", "active", "recalled"])}),
            ),
            ("PaymentRequest", "amount", json!({"exclusiveMinimum": 0})),
            (
                "InvoiceRequest",
                "total_amount",
                json!({"exclusiveMinimum": 0}),
            ),
            (
                "SupplierPaymentRequest",
                "amount",
                json!({"exclusiveMinimum": 0}),
            ),
            ("RateWrite", "rate", json!({"exclusiveMinimum": 0})),
        ];
        // Flags (`actors::input::Flag`) take a boolean or the snapshot's 0/1.
        let flag = json!({"anyOf": [{"type": "boolean"}, {"type": "integer", "enum": [0, 1]}]});
        let flags: &[(&str, &[&str])] = &[
            ("CustomerWrite", &["is_credit_allowed"]),
            (
                "MedicineWrite",
                &[
                    "requires_prescription",
                    "is_controlled",
                    "requires_cold_chain",
                    "is_active",
                ],
            ),
            ("SupplierWrite", &["is_active"]),
            ("PrinterWrite", &["is_default", "auto_print", "kick_drawer"]),
            (
                "TemplateWrite",
                &["show_logo", "show_vat", "show_batch", "is_default"],
            ),
            ("PickupRequest", &["signature_captured"]),
            (
                "SettingsWrite",
                &[
                    "show_vat_breakdown",
                    "show_pharmacist_on_receipt",
                    "auto_print_receipt",
                    "tax_enabled",
                ],
            ),
        ];
        let rules = rules.into_iter().chain(
            flags
                .iter()
                .flat_map(|(schema, fields)| fields.iter().map(|f| (*schema, *f, flag.clone()))),
        );
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        for (schema, property, patch) in rules {
            let Some(entry) = components.schemas.get_mut(schema) else {
                continue;
            };
            let Ok(mut value) = serde_json::to_value(&*entry) else {
                continue;
            };
            let Some(target) = value
                .get_mut("properties")
                .and_then(|p| p.get_mut(property))
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            if patch.get("anyOf").is_some() {
                // A union replaces the derived type; `null` stays allowed
                // where it was.
                let nullable = target
                    .get("type")
                    .and_then(Value::as_array)
                    .is_some_and(|t| t.iter().any(|t| t == "null"));
                target.remove("type");
                target.remove("format");
                let mut any = patch["anyOf"].clone();
                if let (true, Some(items)) = (nullable, any.as_array_mut()) {
                    items.push(json!({"type": "null"}));
                }
                target.insert("anyOf".to_owned(), any);
                if let Ok(patched) = serde_json::from_value(value) {
                    *entry = patched;
                }
                continue;
            }
            if let Some(fields) = patch.as_object() {
                for (k, v) in fields {
                    target.insert(k.clone(), v.clone());
                }
            }
            // An integer rule replaces a `number` type, keeping `null` where allowed.
            if patch.get("type").is_some() {
                target.remove("format");
            }
            if let Ok(patched) = serde_json::from_value(value) {
                *entry = patched;
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
    TABLE
        .iter()
        .find(|(segments, _)| {
            segments.len() == wanted.len()
                && segments.iter().zip(&wanted).all(|(t, w)| {
                    (t.starts_with('{') && t.ends_with('}') && !w.is_empty()) || t == w
                })
        })
        .map(|(_, methods)| methods.clone())
}

pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

pub fn configure_api(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/openapi.json").route(web::get().to(openapi_json)));
}

async fn openapi_json() -> HttpResponse {
    static DOC: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| document().to_json().unwrap_or_else(|_| "{}".to_owned()));
    HttpResponse::Ok()
        .content_type("application/json")
        .body(DOC.as_str())
}
