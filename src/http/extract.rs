//! Request extractors that turn every malformed input into a 400 problem
//! naming the field: JSON bodies (size-limited, 413 above the limit), query
//! strings, path ids and paging parameters.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

use crate::state::AppState;
use domain::error::Code;
use domain::{Error, Result};

/// Per-route body limit override.
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

/// Marks a route whose body may be as large as a sync push
/// (`http.push_body_limit_bytes`).
#[derive(Clone, Copy)]
pub struct PushBodyLimit;

/// A JSON body. An empty body reads as `{}` so optional-only bodies may be
/// omitted; anything else that is not valid JSON of the right shape is a 400.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for Json<T> {
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let limit = req
            .app_data::<BodyLimit>()
            .map(|l| l.0)
            .or_else(|| {
                req.app_data::<PushBodyLimit>()?;
                req.app_data::<web::Data<AppState>>()
                    .map(|s| s.config.http.push_body_limit_bytes)
            })
            .or_else(|| {
                req.app_data::<web::Data<AppState>>()
                    .map(|s| s.config.http.body_limit_bytes)
            })
            .unwrap_or(1 << 20);
        let declared = req
            .headers()
            .get(actix_web::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        let mut payload = payload.take();
        Box::pin(async move {
            if declared.is_some_and(|n| n > limit) {
                return Err(too_large(limit));
            }
            let mut body = web::BytesMut::new();
            while let Some(chunk) = payload.next().await {
                let chunk =
                    chunk.map_err(|_| Error::bad_request("The request body could not be read."))?;
                if body.len() + chunk.len() > limit {
                    return Err(too_large(limit));
                }
                body.extend_from_slice(&chunk);
            }
            parse_json(&body).map(Json)
        })
    }
}

fn too_large(limit: usize) -> Error {
    Error::PayloadTooLarge(format!(
        "The request body is larger than the limit of {limit} bytes."
    ))
}

fn malformed(detail: &str) -> Error {
    Error::Validation {
        field: None,
        detail: detail.to_owned(),
        code: Code::MalformedBody,
    }
}

/// Parses JSON, naming the offending field on a shape error.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        body
    };
    // Every body is an object. serde would otherwise read a struct from a
    // JSON array by position (`[null, null]`), which no client means.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(
            if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
                malformed("The request body must be a JSON object.")
            } else {
                malformed("The request body is not valid JSON.")
            },
        );
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return Error::bad_request("The request body is not valid JSON.");
        }
        shape_error(&path, &strip_position(&inner.to_string()))
    })
}

/// A query string; a bad value is a 400 naming the parameter.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned> FromRequest for Query<T> {
    type Error = Error;
    type Future = std::future::Ready<Result<Self>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let qs = req.query_string().as_bytes();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(qs));
        std::future::ready(
            serde_path_to_error::deserialize(de)
                .map(Query)
                .map_err(|e| {
                    let path = e.path().to_string();
                    shape_error(&path, &e.into_inner().to_string())
                }),
        )
    }
}

/// Builds the 400 for a value of the wrong shape at `path`.
fn shape_error(path: &str, message: &str) -> Error {
    let mut field = if path == "." {
        String::new()
    } else {
        path.to_owned()
    };
    if let Some(missing) = between_backticks(message, "missing field `") {
        field = if field.is_empty() {
            missing.clone()
        } else {
            format!("{field}.{missing}")
        };
        return Error::validation(field.clone(), format!("The field `{field}` is required."));
    }
    let detail = if field.is_empty() {
        format!("The request is malformed: {message}.")
    } else {
        format!("The field `{field}` is invalid: {message}.")
    };
    let code = if field.is_empty() {
        Code::MalformedBody
    } else {
        Code::ValidationFailed
    };
    Error::Validation {
        field: (!field.is_empty()).then_some(field),
        detail,
        code,
    }
}

fn between_backticks(message: &str, prefix: &str) -> Option<String> {
    let start = message.find(prefix)? + prefix.len();
    let end = message[start..].find('`')? + start;
    Some(message[start..end].to_owned())
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

// Parsing a path id is the domain's rule (the console parses the same ids).
pub use domain::input::path_id;

pub use domain::paging::{Page, PageParams, Paged, MAX_PAGE_SIZE};

// The console reads the same address for its sign-in's rate limits.
pub use crate::auth::client_address;
