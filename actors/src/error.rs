//! The service's one error type. Every failure, from validation to a lost
//! database connection, becomes one of these, and each maps to an RFC 9457
//! problem response (`application/problem+json`).

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 400: the request is wrong; `field` names the offending field where there is one.
    #[error("{detail}")]
    Validation {
        field: Option<String>,
        detail: String,
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
    /// 413: the body or a batch is over its limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 429: a rate limit was hit.
    #[error("{detail}")]
    TooManyRequests { detail: String, retry_after: u64 },
    /// 503: a mailbox is full, the database is unreachable or too slow.
    #[error("{detail}")]
    Unavailable { detail: String, retry_after: u64 },
    /// 500: a fault of ours. The cause goes to the log, never to the client.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// A sale or change the rules refuse (400, 403, 404): it is answered,
    /// and work sharing its transaction goes on.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Error::Validation { .. } | Error::NotFound(_) | Error::Forbidden(_)
        )
    }

    pub fn validation(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::Validation {
            field: Some(field.into()),
            detail: detail.into(),
        }
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Error::Validation {
            field: None,
            detail: detail.into(),
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
        }
    }
}

/// The problem-details body. `field` is an extension member for 400s.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// A URI reference naming the problem type (`about:blank`: the status says it all).
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
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
            Error::Validation { field, detail } => (detail.clone(), field.clone()),
            other => (other.to_string(), None),
        };
        let body = Problem {
            kind: "about:blank".to_owned(),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
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
                return Error::Unavailable {
                    detail: "The database is not reachable right now; please retry shortly."
                        .to_owned(),
                    retry_after: 2,
                };
            }
            let source = std::error::Error::source(&e).map(ToString::to_string);
            return Error::internal(format!("{e}: {}", source.unwrap_or_default()));
        };
        let code = db.code();
        if *code == SqlState::QUERY_CANCELED {
            return Error::Unavailable {
                detail: "The database took too long to answer; please retry.".to_owned(),
                retry_after: 1,
            };
        }
        if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
        {
            return Error::busy("The record is busy; please retry.");
        }
        if *code == SqlState::ADMIN_SHUTDOWN
            || *code == SqlState::CANNOT_CONNECT_NOW
            || *code == SqlState::TOO_MANY_CONNECTIONS
            || *code == SqlState::CRASH_SHUTDOWN
        {
            return Error::Unavailable {
                detail: "The database is not reachable right now; please retry shortly.".to_owned(),
                retry_after: 2,
            };
        }
        if *code == SqlState::UNIQUE_VIOLATION {
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
            };
        }
        Error::internal(format!("{}: {}", code.code(), db))
    }
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
                }
            }
        }
    }
}
