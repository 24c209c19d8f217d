//! The service's one error type. Every failure, from validation to a lost
//! database connection, becomes one of these, and each maps to an RFC 9457
//! problem response (`application/problem+json`).

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Declares the stable problem codes: each with its HTTP status (0 for codes
/// that only appear in sync push rejections) and what it means.
macro_rules! codes {
    ($($variant:ident => $code:literal, $status:literal, $meaning:literal;)*) => {
        /// A stable, machine-readable problem code (`code` in every problem
        /// body and in sync push rejections). Never renamed once published.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $($variant,)*
        }

        impl Code {
            /// Every code, in the order docs/errors.md lists them.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $code,)*
                }
            }

            /// The HTTP status a problem with this code has (0: push only).
            pub fn status(self) -> u16 {
                match self {
                    $(Code::$variant => $status,)*
                }
            }

            /// One sentence on what the code means and what to do.
            pub fn meaning(self) -> &'static str {
                match self {
                    $(Code::$variant => $meaning,)*
                }
            }

            pub fn parse(code: &str) -> Option<Code> {
                Code::ALL.iter().copied().find(|c| c.as_str() == code)
            }

            /// The problem type URI: a page of this service describing the code.
            pub fn type_uri(self) -> String {
                format!("/problems/{}", self.as_str())
            }
        }
    };
}

codes! {
    ValidationFailed => "validation_failed", 400,
        "A field is missing, malformed or out of range; `field` names it. Correct the request and send it again.";
    MalformedBody => "malformed_body", 400,
        "The body is not a JSON object of the expected shape. Send valid JSON.";
    InsufficientStock => "insufficient_stock", 400,
        "Not enough sellable stock (expired, quarantined and recalled batches never sell) for a line of the sale.";
    CreditLimitExceeded => "credit_limit_exceeded", 400,
        "A credit sale would take the customer's balance above the credit limit, or the customer may not buy on credit.";
    PrescriptionRequired => "prescription_required", 400,
        "A prescription-only or controlled medicine needs a pending prescription of the branch that lists it.";
    PrescriptionExceeded => "prescription_exceeded", 400,
        "The quantity is more than the prescription still allows for that medicine (prescribed minus already dispensed).";
    AmountExceedsBalance => "amount_exceeds_balance", 400,
        "A payment or refund is larger than the balance it applies to; the message names both figures.";
    ReturnExceedsSold => "return_exceeds_sold", 400,
        "A return asks for more units of a sale line than are left to return (sold minus already returned or awaiting approval); the message names what is left.";
    InvalidBarcode => "invalid_barcode", 400,
        "A scanned code cannot be read: a bad check digit, an unknown Application Identifier, a date that does not exist, a field too long; the message says what and at which character.";
    BatchNotSellable => "batch_not_sellable", 400,
        "A scanned code names a batch of this branch that may not be sold (expired, quarantined or recalled); the message says which and why.";
    RefundToAccount => "refund_to_account", 400,
        "A return of a sale made on credit must be refunded to the customer's account (`refund_method: credit`) while the customer still owes at least the refund; the message names both figures.";
    Unauthenticated => "unauthenticated", 401,
        "No valid access token: it is missing, malformed, expired, revoked, or its user is no longer active. Sign in again.";
    UnknownGtin => "unknown_gtin", 404,
        "The GTIN names no medicine or pack of the organisation.";
    Forbidden => "forbidden", 403,
        "The caller's role or branch does not allow this action (or the till is revoked or of another branch).";
    NotFound => "not_found", 404,
        "The record does not exist, is deleted or deactivated, or belongs to a branch the caller cannot see.";
    MethodNotAllowed => "method_not_allowed", 405,
        "The route exists but not with this method; the `Allow` header lists the methods it takes.";
    RequestTimeout => "request_timeout", 408,
        "The request or its body did not arrive in time; send it again on a fresh connection.";
    Conflict => "conflict", 409,
        "The record's state does not allow this move, a unique value is already taken, or a mutation id was reused with another body.";
    InvoiceOnHold => "invoice_on_hold", 409,
        "The supplier invoice is on hold (a price beyond the tolerance, or goods billed before they were received): it takes no payment until a branch manager or admin releases it.";
    GtinTaken => "gtin_taken", 409,
        "The GTIN already names another medicine or pack (a GTIN names one product); the message names the holder.";
    SerialAlreadyDispensed => "serial_already_dispensed", 409,
        "The pack's serial (one GTIN's serial is dispensed once in the organisation) was already sold and not returned to stock; the message names the sale that took it.";
    Resnapshot => "resnapshot", 409,
        "The sync cursor belongs to a database history that is gone (a failover or a restore renumbered the change feed, or `since` is beyond its head): take a fresh `GET /sync/snapshot` and follow the feed from its `max_rev` and `epoch`.";
    PayloadTooLarge => "payload_too_large", 413,
        "The body or the batch is over its size limit; split it.";
    RateLimited => "rate_limited", 429,
        "Too many attempts in the window; wait for `Retry-After` seconds.";
    InternalError => "internal_error", 500,
        "A fault of the service. It is logged with the request id; retry, and report it if it persists.";
    MailboxFull => "mailbox_full", 503,
        "The branch or till is handling as many requests as its mailbox allows; retry after `Retry-After` seconds.";
    DatabaseUnavailable => "database_unavailable", 503,
        "The database is unreachable or restarting; retry after `Retry-After` seconds.";
    Busy => "busy", 503,
        "The record is locked by another transaction or the database answered too slowly; retry shortly.";
    Unsupported => "unsupported", 0,
        "Sync push only: the server does not apply this entity and op; the rest of the batch goes on.";
    IdempotencyMismatch => "idempotency_mismatch", 0,
        "Sync push only: the client mutation id was already used by this device for a different change.";
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 400: the request is wrong; `field` names the offending field where there is one.
    #[error("{detail}")]
    Validation {
        field: Option<String>,
        detail: String,
        /// `validation_failed`, or a business rule's own code.
        code: Code,
    },
    /// 401: not authenticated.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: authenticated but not allowed.
    #[error("{0}")]
    Forbidden(String),
    /// 404: unknown or deactivated record, or unknown route.
    #[error("{0}")]
    NotFound(String),
    /// 405: the route exists but not with this method.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 409: the state does not allow the move, or a unique value is taken.
    #[error("{0}")]
    Conflict(String),
    /// A refusal with its own code, answered with that code's status (a 404
    /// `unknown_gtin`, a 409 `gtin_taken`).
    #[error("{detail}")]
    Coded {
        code: Code,
        field: Option<String>,
        detail: String,
    },
    /// 413: the body or a batch is over its limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 429: a rate limit was hit.
    #[error("{detail}")]
    TooManyRequests { detail: String, retry_after: u64 },
    /// 503: a mailbox is full, the database is unreachable or too slow.
    #[error("{detail}")]
    Unavailable {
        detail: String,
        retry_after: u64,
        code: Code,
    },
    /// 500: a fault of ours. The cause goes to the log, never to the client.
    #[error("internal error: {0}")]
    Internal(String),
}

const COMMIT_UNKNOWN: &str =
    "The database has not confirmed the write yet; please retry it with the same client_mutation_id shortly.";

impl Error {
    /// A sale or change the rules refuse (400, 403, 404, or a coded 409 such
    /// as a serial already dispensed): it is answered,
    /// and work sharing its transaction goes on.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Error::Validation { .. }
                | Error::Coded { .. }
                | Error::NotFound(_)
                | Error::Forbidden(_)
        )
    }

    pub fn validation(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::rule(Code::ValidationFailed, field, detail)
    }

    /// A 400 for a business rule with its own code (`insufficient_stock`, ...).
    pub fn rule(code: Code, field: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::Validation {
            field: Some(field.into()),
            detail: detail.into(),
            code,
        }
    }

    /// A refusal with its own code and that code's status.
    pub fn coded(code: Code, field: Option<&str>, detail: impl Into<String>) -> Self {
        Error::Coded {
            code,
            field: field.map(str::to_owned),
            detail: detail.into(),
        }
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Error::Validation {
            field: None,
            detail: detail.into(),
            code: Code::ValidationFailed,
        }
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Error::NotFound(detail.into())
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Error::Conflict(detail.into())
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Error::Forbidden(detail.into())
    }

    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Error::Internal(cause.to_string())
    }

    pub fn busy(detail: impl Into<String>) -> Self {
        Error::Unavailable {
            detail: detail.into(),
            retry_after: 1,
            code: Code::Busy,
        }
    }

    /// The actor runtime's refusals: a full mailbox is the client's cue to
    /// retry (503); a panic or a stopped actor is ours (500).
    pub fn refused(why: actors::Refused) -> Self {
        match why {
            actors::Refused::MailboxFull => Error::mailbox_full(why.to_string()),
            other => Error::internal(other),
        }
    }

    /// 503: an actor's mailbox has no room.
    pub fn mailbox_full(detail: impl Into<String>) -> Self {
        Error::Unavailable {
            detail: detail.into(),
            retry_after: 1,
            code: Code::MailboxFull,
        }
    }

    /// 503: the database cannot be reached.
    pub fn database_unavailable(retry_after: u64) -> Self {
        Error::Unavailable {
            detail: "The database is not reachable right now; please retry shortly.".to_owned(),
            retry_after,
            code: Code::DatabaseUnavailable,
        }
    }

    /// 503: a `COMMIT` the database did not confirm within the statement
    /// timeout (a synchronous standby not answering). It may stand later
    /// or never; the client retries with its mutation id and gets one
    /// effect either way (`db::Tx::commit`).
    pub fn commit_unknown() -> Self {
        Error::Unavailable {
            detail: COMMIT_UNKNOWN.to_owned(),
            retry_after: 2,
            code: Code::DatabaseUnavailable,
        }
    }

    /// Whether this is `commit_unknown`: nothing may be made again in its
    /// place (the group commit's one-by-one fallback would wait on the
    /// unconfirmed commit's locks).
    pub fn is_commit_unknown(&self) -> bool {
        matches!(self, Error::Unavailable { detail, .. } if detail == COMMIT_UNKNOWN)
    }

    /// The stable code of this problem.
    pub fn code(&self) -> Code {
        match self {
            Error::Validation { code, .. }
            | Error::Unavailable { code, .. }
            | Error::Coded { code, .. } => *code,
            Error::Unauthorized(_) => Code::Unauthenticated,
            Error::Forbidden(_) => Code::Forbidden,
            Error::NotFound(_) => Code::NotFound,
            Error::MethodNotAllowed(_) => Code::MethodNotAllowed,
            Error::Conflict(_) => Code::Conflict,
            Error::PayloadTooLarge(_) => Code::PayloadTooLarge,
            Error::TooManyRequests { .. } => Code::RateLimited,
            Error::Internal(_) => Code::InternalError,
        }
    }
}

/// The problem-details body. `code` and `field` are extension members.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// A URI reference naming the problem type: `/problems/<code>`, a page
    /// of this service describing the code.
    #[serde(rename = "type")]
    #[schema(example = "/problems/validation_failed")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    /// The stable machine-readable code (see docs/errors.md).
    #[schema(example = "validation_failed")]
    pub code: String,
    /// A sentence a cashier could read.
    pub detail: String,
    /// The offending request field, where there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

pub const PROBLEM_JSON: &str = "application/problem+json";

impl ResponseError for Error {
    fn status_code(&self) -> StatusCode {
        match self {
            Error::Validation { .. } => StatusCode::BAD_REQUEST,
            Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Error::Conflict(_) => StatusCode::CONFLICT,
            Error::Coded { code, .. } => {
                StatusCode::from_u16(code.status()).unwrap_or(StatusCode::BAD_REQUEST)
            }
            Error::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let (detail, field) = match self {
            Error::Internal(cause) => {
                tracing::error!(cause = ?cause, "request failed with a server fault");
                (
                    "An unexpected error occurred. It has been logged; please try again."
                        .to_owned(),
                    None,
                )
            }
            Error::Validation { field, detail, .. } | Error::Coded { field, detail, .. } => {
                (detail.clone(), field.clone())
            }
            other => (other.to_string(), None),
        };
        let code = self.code();
        let body = Problem {
            kind: code.type_uri(),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            code: code.as_str().to_owned(),
            detail,
            field,
        };
        let mut response = HttpResponse::build(status);
        response.content_type(PROBLEM_JSON);
        match self {
            Error::TooManyRequests { retry_after, .. } | Error::Unavailable { retry_after, .. } => {
                response.insert_header((header::RETRY_AFTER, retry_after.to_string()));
            }
            Error::Unauthorized(_) => {
                response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
            }
            _ => {}
        }
        response.json(body)
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        use tokio_postgres::error::SqlState;
        let Some(db) = e.as_db_error() else {
            // No server answer: the connection is gone or never came (a
            // refused or missing socket while PostgreSQL restarts is an I/O
            // error under "error connecting to server").
            let text = e.to_string();
            let network = e.is_closed()
                || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>())
                || text.starts_with("error connecting")
                || text.starts_with("error communicating")
                || text.starts_with("timeout waiting")
                || text.contains("connection");
            if network {
                return Error::database_unavailable(2);
            }
            let source = std::error::Error::source(&e).map(ToString::to_string);
            return Error::internal(format!("{e}: {}", source.unwrap_or_default()));
        };
        let code = db.code();
        if *code == SqlState::QUERY_CANCELED {
            return Error::busy("The database took too long to answer; please retry.");
        }
        if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
        {
            return Error::busy("The record is busy; please retry.");
        }
        if unavailable_state(code) {
            return Error::database_unavailable(2);
        }
        if *code == SqlState::UNIQUE_VIOLATION {
            if db.constraint() == Some("product_gtins_pkey") {
                return Error::coded(
                    Code::GtinTaken,
                    Some("gtin"),
                    "This GTIN already names another medicine or pack.",
                );
            }
            return Error::conflict("A record with the same unique value already exists.");
        }
        if *code == SqlState::FOREIGN_KEY_VIOLATION {
            return Error::bad_request("The request refers to a record that does not exist.");
        }
        if *code == SqlState::CHECK_VIOLATION || *code == SqlState::NOT_NULL_VIOLATION {
            return Error::bad_request("A value is outside its allowed range.");
        }
        // A value the client sent that the database cannot hold (too many
        // digits, out of range): the client's mistake, not ours.
        if code.code().starts_with("22") {
            tracing::warn!(error = ?db.to_string(), "database rejected a value");
            return Error::Validation {
                field: db.column().map(str::to_owned),
                detail: "A value is out of range or malformed.".to_owned(),
                code: Code::ValidationFailed,
            };
        }
        Error::internal(format!("{}: {}", code.code(), db))
    }
}

/// Whether a server error means "this database cannot take the request
/// now, another moment (or another node) will": the answer is 503 with
/// Retry-After, never 500. A failover produces each of them:
///
/// - class 08, connection exceptions (the server ended the connection or
///   refused to start one);
/// - 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now
///   (a node restarting, in recovery, or being demoted), 57P05 idle session
///   timeout;
/// - 25006 read-only transaction: a write reached a node that is (or has
///   just become) a replica, through a connection made while it led;
/// - 53300 too many connections.
///
/// Query cancellation (57014, the statement timeout) is not here: it is the
/// service's own limit and answers `busy`.
pub fn unavailable_state(code: &tokio_postgres::error::SqlState) -> bool {
    use tokio_postgres::error::SqlState;
    let text = code.code();
    text.starts_with("08")
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
        || *code == SqlState::IDLE_SESSION_TIMEOUT
        || *code == SqlState::READ_ONLY_SQL_TRANSACTION
        || *code == SqlState::TOO_MANY_CONNECTIONS
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            other => {
                tracing::warn!(error = ?other.to_string(), "database pool unavailable");
                Error::Unavailable {
                    detail:
                        "The service is busy or the database is unreachable; please retry shortly."
                            .to_owned(),
                    retry_after: 1,
                    code: Code::DatabaseUnavailable,
                }
            }
        }
    }
}

impl From<actors::Refused> for Error {
    fn from(why: actors::Refused) -> Self {
        Error::refused(why)
    }
}

#[cfg(test)]
mod tests {
    use tokio_postgres::error::SqlState;

    use super::{unavailable_state, Code, Error};

    #[test]
    fn what_a_failover_answers_is_unavailable_and_a_clients_mistake_is_not() {
        for code in [
            "08000", "08003", "08006", "08001", "08004", "57P01", "57P02", "57P03", "57P05",
            "25006", "53300",
        ] {
            assert!(
                unavailable_state(&SqlState::from_code(code)),
                "{code} means: retry shortly"
            );
        }
        for code in [
            "57014", "40001", "40P01", "23505", "23503", "22003", "42P01", "P0001",
        ] {
            assert!(
                !unavailable_state(&SqlState::from_code(code)),
                "{code} is not about the database being away"
            );
        }
    }

    #[test]
    fn an_unconfirmed_commit_is_the_lost_databases_503_and_known_apart() {
        let unknown = Error::commit_unknown();
        assert_eq!(unknown.code(), Code::DatabaseUnavailable);
        assert!(matches!(unknown, Error::Unavailable { retry_after: 2, .. }));
        assert!(unknown.is_commit_unknown());
        assert!(!unknown.is_refusal());
        assert!(!Error::database_unavailable(2).is_commit_unknown());
        assert!(!Error::busy("busy").is_commit_unknown());
    }
}
