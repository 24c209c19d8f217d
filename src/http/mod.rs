//! The HTTP layer: one module per URL area, each with `configure`.

pub mod approvals;
pub mod audit_log;
pub mod auth;
pub mod body_deadline;
pub mod branches;
pub mod compliance;
pub mod coupons;
pub mod currency;
pub mod customers;
pub mod dashboard;
pub mod devices;
pub mod dispensing;
pub mod docs;
pub mod extract;
pub mod fiscal;
pub mod goods_received;
pub mod health;
pub mod marketing;
pub mod medicines;
pub mod openapi;
pub mod ops;
pub mod packs;
pub mod prescriptions;
pub mod printing;
pub mod problems;
pub mod purchase_orders;
pub mod purchases;
pub mod reports;
pub mod returns;
pub mod sales;
pub mod scan;
pub mod sessions;
pub mod settings;
pub mod stock_value;
pub mod stockcount;
pub mod supplier_finance;
pub mod supplier_returns;
pub mod suppliers;
pub mod sync;
pub mod transfers;
pub mod users;
pub mod write_offs;

use actix_web::dev::ServiceResponse;
use actix_web::http::header;
use actix_web::middleware::ErrorHandlerResponse;
use actix_web::{web, HttpRequest, ResponseError};
use utoipa_actix_web::service_config::ServiceConfig;

use domain::Error;

/// Every route the OpenAPI document lists, registered once: each handler
/// carries its method and path (`#[get("/customers")]` under its
/// `#[utoipa::path(...)]`), and registering it here both mounts it and adds
/// it to the document ([`openapi::document`] builds from this same function).
/// The probes sit at the root, the API under `/api/v1`.
pub fn configure_documented(cfg: &mut ServiceConfig) {
    health::configure(cfg);
    cfg.service(utoipa_actix_web::scope("/api/v1").configure(configure_api));
}

/// [`configure_documented`] for a plain actix `App`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    configure_documented(&mut ServiceConfig::new(cfg));
}

/// Everything under `/api/v1`.
pub fn configure_api(cfg: &mut ServiceConfig) {
    auth::configure(cfg);
    branches::configure(cfg);
    users::configure(cfg);
    sessions::configure(cfg);
    coupons::configure(cfg);
    stockcount::configure(cfg);
    transfers::configure(cfg);
    supplier_finance::configure(cfg);
    medicines::configure(cfg);
    packs::configure(cfg);
    scan::configure(cfg);
    goods_received::configure(cfg);
    purchases::configure(cfg);
    purchase_orders::configure(cfg);
    sales::configure(cfg);
    customers::configure(cfg);
    suppliers::configure(cfg);
    sync::configure(cfg);
    devices::configure(cfg);
    compliance::configure(cfg);
    prescriptions::configure(cfg);
    dispensing::configure(cfg);
    approvals::configure(cfg);
    marketing::configure(cfg);
    printing::configure(cfg);
    settings::configure(cfg);
    currency::configure(cfg);
    audit_log::configure(cfg);
    dashboard::configure(cfg);
    reports::configure(cfg);
    stock_value::configure(cfg);
    returns::configure(cfg);
    write_offs::configure(cfg);
    supplier_returns::configure(cfg);
    fiscal::configure(cfg);
    ops::configure(cfg);
    openapi::configure_api(cfg);
}

/// Unknown routes get a problem body, not an empty 404. A documented path
/// asked with a method it does not have gets 405 with `Allow` (each handler
/// is its own method-guarded resource, so such a request lands here).
pub async fn not_found(req: HttpRequest) -> actix_web::HttpResponse {
    if let Some(methods) = openapi::allowed_methods(req.path()) {
        let detail = format!("{} is not allowed on {}.", req.method(), req.path());
        let mut response = Error::MethodNotAllowed(detail).error_response();
        if let Ok(methods) = header::HeaderValue::from_str(&methods) {
            response.headers_mut().insert(header::ALLOW, methods);
        }
        return response;
    }
    Error::not_found(format!("No route matches {} {}.", req.method(), req.path())).error_response()
}

/// Turns actix's empty 405 into a problem body with the `Allow` header.
pub fn method_not_allowed<B>(
    res: ServiceResponse<B>,
) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let detail = format!(
        "{} is not allowed on {}.",
        res.request().method(),
        res.request().path()
    );
    let allow = openapi::allowed_methods(res.request().path());
    let (req, _) = res.into_parts();
    let mut response = Error::MethodNotAllowed(detail).error_response();
    if let Some(methods) = allow.and_then(|m| header::HeaderValue::from_str(&m).ok()) {
        response.headers_mut().insert(header::ALLOW, methods);
    }
    Ok(ErrorHandlerResponse::Response(
        ServiceResponse::new(req, response).map_into_right_body(),
    ))
}
