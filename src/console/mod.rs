//! `/console`: the back-office console in the browser. Server-rendered
//! pages (askama templates under `templates/console/`, checked when the
//! binary is built), one small embedded script (htmx, vendored under
//! `vendor/htmx` with its licence) and no other asset. Every page calls the
//! same domain functions, and the same role checks (`Caller::require`,
//! `branch_filter`), as the API; writes go through the API handlers' own
//! functions, so a rule holds identically in both. Not part of the OpenAPI
//! document.
//!
//! One file per page area: [`session`] (sign-in, sign-out, the session and
//! form-token extractors), [`dashboard`], [`reports`], [`books`], [`sync`]
//! (conflicts and devices), [`approvals`], [`operations`], [`people`]
//! (users, branches), [`settings`] and [`audit`]; [`charts`] draws the SVG
//! charts and [`table`] the tables that are also the CSV downloads.

pub mod approvals;
pub mod audit;
pub mod books;
pub mod buying;
pub mod catalogue;
pub mod charts;
pub mod counter;
pub mod counts;
pub mod customers;
pub mod dashboard;
pub mod delivery;
pub mod fiscal;
pub mod forms;
pub mod operations;
pub mod order_lines;
pub mod people;
pub mod reports;
pub mod sales;
pub mod session;
pub mod settings;
pub mod stock;
pub mod supplier_invoices;
pub mod supplier_returns;
pub mod suppliers;
pub mod sync;
pub mod table;
pub mod transfers;

use actix_web::http::{header, StatusCode};
use actix_web::middleware::DefaultHeaders;
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use askama::Template;
use rust_decimal::Decimal;
use uuid::Uuid;

use domain::{Action, Error};
pub use session::{NoFields, Posted, Staff};

const HTMX_JS: &[u8] = include_bytes!("../../vendor/htmx/htmx.min.js");
const HTMX_LICENSE: &[u8] = include_bytes!("../../vendor/htmx/LICENSE");
const STYLESHEET: &[u8] = include_bytes!("../../templates/console/console.css");

/// What a console handler answers: a page, or a [`Failure`] shown as one.
pub type Outcome = Result<HttpResponse, Failure>;

/// Mounts `/console` (the caller adds it beside the API; it is not in the
/// OpenAPI document).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/console")
            .wrap(
                DefaultHeaders::new()
                    .add((
                        header::CONTENT_SECURITY_POLICY,
                        "default-src 'none'; script-src 'self'; style-src 'self'; \
                         img-src 'self' data:; connect-src 'self'; form-action 'self'; \
                         frame-ancestors 'none'; base-uri 'none'",
                    ))
                    .add((header::X_FRAME_OPTIONS, "DENY"))
                    .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
                    .add((header::REFERRER_POLICY, "same-origin"))
                    .add((header::CACHE_CONTROL, "no-store")),
            )
            .route("", web::get().to(home))
            .route("/", web::get().to(home))
            // A malformed query or form is a page in words, not actix's text.
            .app_data(web::QueryConfig::default().error_handler(|e, _| {
                Failure::Page(Error::bad_request(format!(
                    "The address is not valid: {e}."
                )))
                .into()
            }))
            .app_data(web::FormConfig::default().error_handler(|e, _| {
                Failure::Page(Error::bad_request(format!(
                    "The form could not be read: {e}."
                )))
                .into()
            }))
            .route("/login", web::get().to(session::login_form))
            .route("/login", web::post().to(session::login))
            .route("/logout", web::post().to(session::logout))
            .route("/assets/htmx.min.js", web::get().to(htmx))
            .route("/assets/htmx-LICENSE.txt", web::get().to(htmx_licence))
            .route("/assets/console.css", web::get().to(stylesheet))
            .configure(dashboard::configure)
            .configure(reports::configure)
            .configure(catalogue::configure)
            .configure(counter::configure)
            .configure(sales::configure)
            .configure(counts::configure)
            .configure(stock::configure)
            .configure(transfers::configure)
            .configure(buying::configure)
            .configure(suppliers::configure)
            .configure(fiscal::configure)
            .configure(customers::configure)
            .configure(books::configure)
            .configure(sync::configure)
            .configure(approvals::configure)
            .configure(operations::configure)
            .configure(people::configure)
            .configure(settings::configure)
            .configure(audit::configure)
            .default_service(web::to(not_found)),
    );
}

async fn home(_: Staff) -> HttpResponse {
    see_other("/console/dashboard")
}

async fn not_found(staff: Staff) -> Outcome {
    Err(Failure::Shown(
        Box::new(staff),
        Error::not_found("There is no such page in the console."),
    ))
}

async fn htmx() -> HttpResponse {
    asset("text/javascript; charset=utf-8", HTMX_JS)
}

async fn htmx_licence() -> HttpResponse {
    asset("text/plain; charset=utf-8", HTMX_LICENSE)
}

async fn stylesheet() -> HttpResponse {
    asset("text/css; charset=utf-8", STYLESHEET)
}

/// Assets change only with the binary: a day's caching is safe.
fn asset(content_type: &'static str, body: &'static [u8]) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CACHE_CONTROL, "public, max-age=86400"))
        .body(body)
}

/// A redirect after a post (303: the browser follows it with a GET).
pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .finish()
}

/// A rendered page.
pub fn html<T: Template>(page: &T) -> Outcome {
    let body = page.render().map_err(Error::internal)?;
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(body))
}

/// A rendered page with another status (a form shown again with its errors).
pub fn html_status<T: Template>(status: StatusCode, page: &T) -> Outcome {
    let mut res = html(page)?;
    *res.status_mut() = status;
    Ok(res)
}

/// A problem's words for a person: the API's text without its code marks.
pub fn plain(detail: &str) -> String {
    detail.replace('`', "")
}

/// Why a console request did not get its page.
#[derive(Debug)]
pub enum Failure {
    /// No live session: the browser goes to the sign-in page.
    SignIn(&'static str),
    /// A form post without the session's form token.
    Csrf,
    /// Any other refusal or fault, shown as a page in words.
    Page(Error),
    /// The same, with the staff member known (the page keeps its menu).
    Shown(Box<Staff>, Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Page(e)
    }
}

impl From<deadpool_postgres::PoolError> for Failure {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        Failure::Page(e.into())
    }
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Page(e.into())
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::SignIn(why) => f.write_str(why),
            Failure::Csrf => f.write_str("form token missing or wrong"),
            Failure::Page(e) | Failure::Shown(_, e) => write!(f, "{e}"),
        }
    }
}

#[derive(Template)]
#[template(path = "console/error.html")]
struct ErrorPage<'a> {
    chrome: Option<Chrome>,
    title: &'a str,
    message: String,
}

impl ResponseError for Failure {
    fn status_code(&self) -> StatusCode {
        match self {
            Failure::SignIn(_) => StatusCode::SEE_OTHER,
            Failure::Csrf => StatusCode::FORBIDDEN,
            Failure::Page(e) | Failure::Shown(_, e) => e.status_code(),
        }
    }

    fn error_response(&self) -> HttpResponse {
        let (staff, error) = match self {
            Failure::SignIn(why) => {
                // A visitor with no session is simply asked to sign in; one
                // whose session ended is told so.
                let to = if *why == session::NO_SESSION {
                    "/console/login"
                } else {
                    "/console/login?ended=1"
                };
                return HttpResponse::SeeOther()
                    .insert_header((header::LOCATION, to))
                    // An htmx request follows this instead of swapping in the page.
                    .insert_header(("HX-Redirect", to))
                    .finish();
            }
            Failure::Csrf => (
                None,
                Error::forbidden(
                    "This form has expired or did not come from the console, so nothing was \
                     changed. Go back, reload the page and try again.",
                ),
            ),
            Failure::Page(e) => (None, clone_error(e)),
            Failure::Shown(s, e) => (Some(s.as_ref()), clone_error(e)),
        };
        let status = error.status_code();
        let (title, message) = match &error {
            Error::Internal(cause) => {
                tracing::error!(%cause, "console page failed");
                (
                    "Something went wrong",
                    "Something went wrong on our side; nothing you did caused it. \
                     Try again in a moment."
                        .to_owned(),
                )
            }
            Error::Forbidden(d) => ("Not allowed", plain(d)),
            Error::NotFound(d) => ("Not found", plain(d)),
            Error::Unavailable { detail, .. } => ("Busy", plain(detail)),
            other => ("That did not work", plain(&other.to_string())),
        };
        let page = ErrorPage {
            chrome: staff.map(|s| Chrome::new(s, "")),
            title,
            message,
        };
        match page.render() {
            Ok(body) => HttpResponse::build(status)
                .content_type("text/html; charset=utf-8")
                .body(body),
            Err(_) => HttpResponse::build(status)
                .content_type("text/plain; charset=utf-8")
                .body(title),
        }
    }
}

/// `domain::Error` is not `Clone`; the page only needs its kind and words.
fn clone_error(e: &Error) -> Error {
    match e {
        Error::Validation {
            field,
            detail,
            code,
        } => Error::Validation {
            field: field.clone(),
            detail: detail.clone(),
            code: *code,
        },
        Error::Unauthorized(d) => Error::Unauthorized(d.clone()),
        Error::Forbidden(d) => Error::Forbidden(d.clone()),
        Error::NotFound(d) => Error::NotFound(d.clone()),
        Error::MethodNotAllowed(d) => Error::MethodNotAllowed(d.clone()),
        Error::Conflict(d) => Error::Conflict(d.clone()),
        Error::Coded {
            code,
            field,
            detail,
        } => Error::Coded {
            code: *code,
            field: field.clone(),
            detail: detail.clone(),
        },
        Error::PayloadTooLarge(d) => Error::PayloadTooLarge(d.clone()),
        Error::TooManyRequests {
            detail,
            retry_after,
        } => Error::TooManyRequests {
            detail: detail.clone(),
            retry_after: *retry_after,
        },
        Error::Unavailable {
            detail,
            retry_after,
            code,
        } => Error::Unavailable {
            detail: detail.clone(),
            retry_after: *retry_after,
            code: *code,
        },
        Error::Internal(c) => Error::Internal(c.clone()),
    }
}

/// One entry of the menu.
#[derive(Debug, Clone)]
pub struct NavItem {
    pub href: &'static str,
    pub label: &'static str,
    pub current: bool,
}

/// What every page shows around its content: who is signed in, the menu
/// their role allows, and the form token for the sign-out button.
#[derive(Debug, Clone)]
pub struct Chrome {
    pub user_name: String,
    pub role: String,
    pub csrf: String,
    pub nav: Vec<NavItem>,
}

impl Chrome {
    /// The menu for `staff`, with `current` (an href) marked.
    pub fn new(staff: &Staff, current: &str) -> Chrome {
        let role = staff.role();
        let all: [(&'static str, &'static str, Option<Action>); 18] = [
            ("/console/dashboard", "Dashboard", None),
            ("/console/counter", "Counter", Some(Action::Sell)),
            ("/console/medicines", "Catalogue", None),
            ("/console/sales", "Sales", None),
            ("/console/stock", "Stock", None),
            ("/console/customers", "Customers", None),
            (
                "/console/purchase-orders",
                "Buying",
                Some(Action::ReadPurchaseOrders),
            ),
            (
                "/console/fiscal",
                "Fiscal queue",
                Some(Action::ReadFiscalDocuments),
            ),
            (
                "/console/reports/sales",
                "Reports",
                Some(Action::ReadReports),
            ),
            ("/console/books/prescriptions", "Books", None),
            (
                "/console/sync/conflicts",
                "Sync conflicts",
                Some(Action::ResolveConflicts),
            ),
            ("/console/devices", "Devices", None),
            ("/console/approvals", "Approvals", None),
            (
                "/console/operations",
                "Operations",
                Some(Action::OperateActors),
            ),
            ("/console/users", "Users", Some(Action::ManageUsers)),
            ("/console/branches", "Branches", None),
            ("/console/settings", "Settings", None),
            ("/console/audit", "Audit log", Some(Action::ReadAuditLog)),
        ];
        let nav = all
            .into_iter()
            .filter_map(|(href, label, action)| {
                // Reports open on the first tab the role may read.
                let href = match href {
                    "/console/reports/sales" => reports::first_tab(role)?,
                    _ if action.is_some_and(|a| !a.permits(role)) => return None,
                    _ => href,
                };
                Some(NavItem {
                    href,
                    label,
                    current: href == current,
                })
            })
            .collect();
        Chrome {
            user_name: staff.full_name.clone(),
            role: role_label(role).to_owned(),
            csrf: staff.csrf.clone(),
            nav,
        }
    }
}

pub fn role_label(role: domain::Role) -> &'static str {
    role.label()
}

/// A notice above a page's content after a form: what was done, or why not.
#[derive(Debug, Clone, Default)]
pub struct Notice {
    pub ok: Option<String>,
    pub error: Option<String>,
    /// The form field the error is about, shown beside it.
    pub field: Option<String>,
}

impl Notice {
    pub fn done(text: impl Into<String>) -> Notice {
        Notice {
            ok: Some(text.into()),
            ..Notice::default()
        }
    }

    /// The words of a refusal, with its field when it names one. Faults of
    /// ours are not described.
    pub fn from_error(e: &Error) -> Notice {
        let field = match e {
            Error::Validation { field, .. } | Error::Coded { field, .. } => field.clone(),
            _ => None,
        };
        let text = match e {
            Error::Internal(cause) => {
                tracing::error!(%cause, "console action failed");
                "Something went wrong on our side; nothing was changed. Try again in a moment."
                    .to_owned()
            }
            other => plain(&other.to_string()),
        };
        Notice {
            ok: None,
            error: Some(text),
            field,
        }
    }

    /// The error's text when it is about `field`.
    pub fn for_field(&self, field: &str) -> Option<&str> {
        match (&self.field, &self.error) {
            (Some(f), Some(e)) if f == field => Some(e),
            _ => None,
        }
    }

    /// The error's text when it is about no field shown on the form.
    pub fn general<'a>(&self, fields: impl AsRef<[&'a str]>) -> Option<&str> {
        match (&self.field, &self.error) {
            (Some(f), Some(_)) if fields.as_ref().contains(&f.as_str()) => None,
            (_, Some(e)) => Some(e),
            _ => None,
        }
    }
}

/// An amount with two decimals and thousands separators (`1,234.50`).
pub fn money(d: Decimal) -> String {
    let rounded = d.round_dp(2);
    let text = format!("{rounded:.2}");
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text.as_str()),
    };
    let (whole, cents) = digits.split_once('.').unwrap_or((digits, "00"));
    let mut grouped = String::new();
    for (i, ch) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    format!("{sign}{grouped}.{cents}")
}

/// A timestamp as the console shows it (UTC, to the minute).
pub fn when(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// The optional id of a filter field: blank is none; anything else must be
/// an id (400 naming the field).
pub fn optional_id(field: &str, v: Option<&str>) -> Result<Option<Uuid>, Error> {
    match v.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => Uuid::parse_str(s)
            .map(Some)
            .map_err(|_| Error::validation(field, format!("{field} is not a valid choice."))),
    }
}

/// The path and query of the request, for links that keep the filters.
pub fn query_of(req: &HttpRequest) -> String {
    req.query_string().to_owned()
}

/// A branch choice of a picker.
#[derive(Debug, Clone)]
pub struct BranchOption {
    pub id: String,
    pub label: String,
    pub selected: bool,
}

/// The branch picker of `staff`: every branch for those who may work on
/// any (with "All branches" first), none for the others (their own branch
/// is implied).
pub async fn branch_options<C: deadpool_postgres::GenericClient + Sync>(
    c: &C,
    staff: &Staff,
    selected: Option<Uuid>,
) -> Result<Vec<BranchOption>, Error> {
    if !staff.caller.any_branch() {
        return Ok(Vec::new());
    }
    let mut options = vec![BranchOption {
        id: String::new(),
        label: "All branches".to_owned(),
        selected: selected.is_none(),
    }];
    for b in domain::branches::list(c, None).await? {
        options.push(BranchOption {
            selected: selected == Some(b.id),
            id: b.id.to_string(),
            label: format!("{} ({})", b.name, b.code),
        });
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn money_groups_thousands_and_keeps_two_places() {
        let d = |s: &str| Decimal::from_str(s).unwrap();
        assert_eq!(money(d("0")), "0.00");
        assert_eq!(money(d("12.5")), "12.50");
        assert_eq!(money(d("1234.567")), "1,234.57");
        assert_eq!(money(d("1234567")), "1,234,567.00");
        assert_eq!(money(d("-1234.5")), "-1,234.50");
        assert_eq!(money(d("999")), "999.00");
    }

    #[test]
    fn plain_drops_code_marks() {
        assert_eq!(plain("`email` must be set."), "email must be set.");
    }

    #[test]
    fn notices_place_their_error_beside_its_field() {
        let n = Notice::from_error(&Error::validation("tax_rate", "`tax_rate` is wrong."));
        assert_eq!(n.for_field("tax_rate"), Some("tax_rate is wrong."));
        assert_eq!(n.for_field("name"), None);
        assert_eq!(n.general(["tax_rate"]), None);
        assert_eq!(n.general(["name"]), Some("tax_rate is wrong."));
    }
}
