//! The OpenAPI 3.1 document, generated from the handlers' annotations, and
//! the interactive docs page.

use actix_web::{web, HttpResponse};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_scalar::{Scalar, Servable};

use crate::http;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Pharmacy Operations Service API",
        description = "Multi-branch pharmacy back-office: stock, sales, customers, suppliers, sync for tills, reports and compliance. Errors are RFC 9457 problem details.",
    ),
    paths(
        http::auth::login, http::auth::refresh, http::auth::me,
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
    ),
    components(schemas(actors::error::Problem, actors::Role)),
    modifiers(&BearerAuth),
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

/// `/docs`: the interactive reference, reading the live document.
pub fn docs_service() -> Scalar<utoipa::openapi::OpenApi> {
    Scalar::with_url("/docs", document())
}
