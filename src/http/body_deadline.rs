//! A deadline for the whole request body.
//!
//! actix-web bounds the time to receive a request's head
//! (`http.client_request_timeout_ms`) and an idle keep-alive connection
//! (`http.keep_alive_secs`), but not the body: a client trickling one byte
//! every few seconds would hold its connection (and a worker's attention)
//! for as long as it likes. This middleware gives every body a deadline
//! (`http.body_timeout_secs`; `http.push_body_timeout_secs` for
//! `POST /sync/push`, whose bodies may be 8 MiB). A body not complete by
//! then fails its read, the request is answered 408 (a problem body), and
//! the connection is closed.
//!
//! A response given before the body was read to its end (a 401 before the
//! JSON was read, a 408) also closes the connection: the server does not
//! keep reading, or draining, what the client still sends.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::body::{BodySize, BoxBody, EitherBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::{header, ConnectionType, StatusCode};
use actix_web::middleware::Next;
use actix_web::web::{self, Bytes};
use actix_web::{HttpMessage, HttpResponse};
use futures_util::{Stream, StreamExt};
use tokio::time::{Instant, Sleep};

use crate::state::AppState;
use domain::error::{Code, Problem, PROBLEM_JSON};

/// The route whose bodies get `http.push_body_timeout_secs`.
pub const PUSH_PATH: &str = "/api/v1/sync/push";

/// The body is still arriving (or was never read to its end).
const READING: u8 = 0;
/// The body was read to its end.
const COMPLETE: u8 = 1;
/// The deadline passed before the body was complete.
const TIMED_OUT: u8 = 2;

/// The request's payload, shared between the stream the handler reads and
/// the middleware, which keeps it alive until the response is sent (so the
/// server sees an unread body and closes instead of draining it).
type Shared = Rc<RefCell<Payload>>;

/// The payload as the handler reads it: the original, until the deadline.
struct Deadline {
    inner: Shared,
    deadline: Instant,
    /// Started the first time the body is not ready (most bodies never are
    /// waited for).
    timer: Option<Pin<Box<Sleep>>>,
    state: Rc<Cell<u8>>,
}

impl Stream for Deadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.state.get() == TIMED_OUT {
            return Poll::Ready(None);
        }
        let polled = this.inner.borrow_mut().poll_next_unpin(cx);
        match polled {
            Poll::Ready(None) => {
                this.state.set(COMPLETE);
                Poll::Ready(None)
            }
            Poll::Ready(Some(item)) => Poll::Ready(Some(item)),
            Poll::Pending => {
                let deadline = this.deadline;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.state.set(TIMED_OUT);
                        Poll::Ready(Some(Err(PayloadError::Io(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the request body did not arrive in time",
                        )))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

/// A response body that keeps the request's payload alive until it has
/// been sent: the server then sees a body the handler left unread and
/// closes the connection, instead of draining (a chunked body) for as long
/// as the client keeps trickling.
struct Guarded {
    body: BoxBody,
    _unread: Shared,
}

impl MessageBody for Guarded {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Pin::new(&mut self.body).poll_next(cx)
    }
}

/// `res` with the connection closed after it and the payload kept alive
/// until then.
fn closing<B: MessageBody + 'static>(
    mut res: ServiceResponse<B>,
    unread: Shared,
) -> ServiceResponse<BoxBody> {
    res.response_mut()
        .head_mut()
        .set_connection_type(ConnectionType::Close);
    res.map_body(|_, body| {
        BoxBody::new(Guarded {
            body: BoxBody::new(body),
            _unread: unread,
        })
    })
}

/// Whether the request announces a body.
fn has_body(req: &ServiceRequest) -> bool {
    let headers = req.headers();
    let sized = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() != "0");
    sized || headers.contains_key(header::TRANSFER_ENCODING)
}

/// The body deadline of this request.
fn limit(req: &ServiceRequest) -> Duration {
    let (plain, push) = req
        .app_data::<web::Data<AppState>>()
        .map(|s| {
            (
                s.config.http.body_timeout_secs,
                s.config.http.push_body_timeout_secs,
            )
        })
        .unwrap_or((30, 120));
    Duration::from_secs(if req.path() == PUSH_PATH { push } else { plain })
}

/// The middleware (wrapped around the whole app with `from_fn`).
pub async fn body_deadline(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    if !has_body(&req) {
        return Ok(next.call(req).await?.map_into_left_body());
    }
    let limit = limit(&req);
    let state = Rc::new(Cell::new(READING));
    let inner: Shared = Rc::new(RefCell::new(req.take_payload()));
    let timed = Deadline {
        inner: inner.clone(),
        deadline: Instant::now() + limit,
        timer: None,
        state: state.clone(),
    };
    req.set_payload(Payload::Stream {
        payload: Box::pin(timed),
    });
    let res = next.call(req).await?;
    match state.get() {
        COMPLETE => Ok(res.map_into_left_body()),
        TIMED_OUT => {
            tracing::info!(
                limit_secs = limit.as_secs(),
                "request body not complete in time; answered 408"
            );
            let timeout = res.into_response(request_timeout(limit));
            Ok(closing(timeout, inner).map_into_right_body())
        }
        _ if finished(&inner) => Ok(res.map_into_left_body()),
        _ => Ok(closing(res, inner).map_into_right_body()),
    }
}

/// Whether a body the handler did not read to its end has nevertheless
/// all arrived (what is left of it is read and discarded, without waiting).
fn finished(inner: &Shared) -> bool {
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut payload = inner.borrow_mut();
    loop {
        match payload.poll_next_unpin(&mut cx) {
            Poll::Ready(None) => return true,
            Poll::Ready(Some(Ok(_))) => continue,
            Poll::Ready(Some(Err(_))) | Poll::Pending => return false,
        }
    }
}

/// The 408 problem answer; the connection closes after it.
fn request_timeout(limit: Duration) -> HttpResponse {
    let status = StatusCode::REQUEST_TIMEOUT;
    HttpResponse::build(status)
        .content_type(PROBLEM_JSON)
        .force_close()
        .json(Problem {
            kind: Code::RequestTimeout.type_uri(),
            code: Code::RequestTimeout.as_str().to_owned(),
            title: status
                .canonical_reason()
                .unwrap_or("Request Timeout")
                .to_owned(),
            status: status.as_u16(),
            detail: format!(
                "The request body did not arrive within {} seconds; please retry.",
                limit.as_secs()
            ),
            field: None,
        })
}
