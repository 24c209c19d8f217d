//! What tills pull: `GET /sync/snapshot` once, then `GET /sync/changes`
//! from its `max_rev` on (with `wait`, a long poll). Both are branch-scoped
//! for non-admins: their own branch's rows and the organisation-wide ones.

use std::time::Duration;

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use crate::auth::{Caller, Signed};
use crate::http::extract::Query;
use crate::state::AppState;
use domain::error::Problem;
use domain::sync::snapshot::{self, ChangeFeed, Cursor, Scope, Snapshot};
use domain::{Error, Result};

/// Changes per page unless `limit` says otherwise, and the most it may say.
pub const DEFAULT_LIMIT: i64 = 500;
pub const MAX_LIMIT: i64 = 5000;

/// The longest a long poll may wait, in seconds.
pub const MAX_WAIT_SECS: u64 = 30;

use actix_web::get;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_snapshot).service(changes);
}

/// An admin mirrors every branch; anyone else its own.
fn scope(caller: &Caller) -> Scope {
    (!caller.any_branch()).then_some(caller.branch_id)
}

/// Every live synced row the caller may mirror, read in one consistent
/// transaction: the arrays hold exactly the writes up to `max_rev`. Deleted
/// rows are left out (the change feed carries their tombstones); deactivated
/// ones are in, with `is_active` 0. A non-admin gets only its own branch, its
/// branch's users and batches, and medicine `stock_quantity` at its branch; an
/// admin every branch, user and batch, and chain-wide stock.
#[utoipa::path(tag = "sync", security(("bearer" = [])),
    responses((status = 200, body = Snapshot), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[get("/sync/snapshot")]
pub async fn get_snapshot(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse> {
    let snapshot = state
        .reads()
        .snapshot(&state.live.horizon, scope(&caller))
        .await?;
    Ok(HttpResponse::Ok().json(snapshot))
}

/// `since` and `limit`, parsed here so a bad value names its parameter.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChangesQuery {
    /// The cursor: `max_rev` of the snapshot or of the previous page (default 0).
    #[param(value_type = Option<i64>, minimum = 0)]
    pub since: Option<String>,
    /// The `epoch` of the answer that gave `since` (snapshot or page). A
    /// different one (the database failed over or was restored since) is
    /// 409 `resnapshot`. Without it only a `since` beyond the feed's head
    /// is told apart.
    pub epoch: Option<String>,
    /// Changes per page: default 500, at most 5000.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 5000)]
    pub limit: Option<String>,
    /// Long poll: with nothing past `since`, hold the request up to this
    /// many seconds (0 to 30, default 0) until a change the caller may see
    /// commits, in any server process; then answer it at once. A wait that
    /// ends with nothing answers an empty page with `max_rev` = `since`.
    /// When the server already holds as many waiting polls as it may: 503
    /// with `Retry-After`.
    #[param(value_type = Option<i64>, minimum = 0, maximum = 30)]
    pub wait: Option<String>,
}

impl ChangesQuery {
    fn since(&self) -> Result<i64> {
        let Some(raw) = self.since.as_deref() else {
            return Ok(0);
        };
        match raw.trim().parse::<i64>() {
            Ok(n) if n >= 0 => Ok(n),
            _ => Err(Error::validation(
                "since",
                "`since` must be a whole number, 0 or more.",
            )),
        }
    }

    /// The epoch the till sent (an empty one counts as none).
    fn epoch(&self) -> Option<&str> {
        self.epoch
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty())
    }

    fn wait(&self) -> Result<Duration> {
        let Some(raw) = self.wait.as_deref() else {
            return Ok(Duration::ZERO);
        };
        match raw.trim().parse::<u64>() {
            Ok(n) if n <= MAX_WAIT_SECS => Ok(Duration::from_secs(n)),
            _ => Err(Error::validation(
                "wait",
                format!("`wait` must be a whole number of seconds from 0 to {MAX_WAIT_SECS}."),
            )),
        }
    }

    fn limit(&self) -> Result<i64> {
        let Some(raw) = self.limit.as_deref() else {
            return Ok(DEFAULT_LIMIT);
        };
        match raw.trim().parse::<i64>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => Err(Error::validation(
                "limit",
                format!("`limit` must be a whole number from 1 to {MAX_LIMIT}."),
            )),
        }
    }
}

/// Changes after `since`, in rev order, that the caller may see (a
/// non-admin: its branch's and the organisation-wide ones). Soft deletes come
/// as `op: "delete"` tombstones. `max_rev` is always the cursor to pass as the
/// next `since`: the settled horizon when `has_more` is false, else the rev of
/// the last change returned. Every rev up to `max_rev` is final, so paging this
/// way never skips or repeats a change. With `wait=S` and nothing past `since`,
/// the request is held until a change the caller may see commits (in any
/// server process) or `S` seconds pass (then `changes` is empty and `max_rev`
/// is `since`).
///
/// Every answer names its `epoch`, the database history its revs count in.
/// A cursor of another epoch (the database failed over or was restored), or
/// a `since` beyond the feed's head, is 409 `resnapshot`: the till takes a
/// fresh snapshot. Never an empty page: the revs it would skip may be
/// reused. A long poll parked across a failover answers the same 409 if a
/// change wakes it, else its empty page, and the next poll the 409.
#[utoipa::path(tag = "sync", security(("bearer" = [])),
    params(ChangesQuery),
    responses((status = 200, body = ChangeFeed), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`resnapshot`: the cursor is of another epoch or beyond the feed's head", body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[get("/sync/changes")]
pub async fn changes(
    state: web::Data<AppState>,
    signed: Signed,
    Query(q): Query<ChangesQuery>,
) -> Result<HttpResponse> {
    // The token is checked with each read of the feed (no round trip of its
    // own); until then the scope is the one it states.
    let read = (|| Ok((q.since()?, q.limit()?, q.wait()?)))();
    let (since, limit, wait) = signed.refuse_after_check(&state.pool, read).await?;
    let scope = scope(signed.claimed());
    let signer = Some(signed.signer());
    let live = &state.live;
    // Taken before the first read: a change that commits after it wakes
    // the wait below.
    let mut tops = live.waiter(scope);
    let mut seen = tops.top();
    let cursor = Cursor {
        since,
        epoch: q.epoch(),
    };
    let page = snapshot::feed(&state.pool, &live.horizon, scope, cursor, limit, signer).await?;
    if !page.changes.is_empty() || wait.is_zero() {
        return Ok(HttpResponse::Ok().json(page));
    }
    // Every later read must be of the history the first one read, whether
    // or not the till named it.
    let epoch = page.epoch;
    let deadline = tokio::time::Instant::now() + wait;
    let _parked = live.park()?;
    // Parked: no connection is held until a change of the scope commits.
    let mut from = page.max_rev.max(since);
    loop {
        match tokio::time::timeout_at(deadline, tops.changed()).await {
            Ok(Ok(())) => {}
            // The time is up (or the server is stopping).
            Err(_) | Ok(Err(_)) => break,
        }
        let top = tops.top();
        if top <= seen {
            continue;
        }
        seen = top;
        let cursor = Cursor {
            since: from,
            epoch: Some(&epoch),
        };
        // Read with the other polls this commit woke (`shared_feed`);
        // boxed, so a parked poll's state stays small.
        let page =
            Box::pin(
                live.reads
                    .read(&state.pool, &live.horizon, scope, cursor, limit, signer),
            )
            .await?;
        if !page.changes.is_empty() {
            return Ok(HttpResponse::Ok().json(page));
        }
        // Nothing the caller may see up to there.
        from = from.max(page.max_rev);
    }
    Ok(HttpResponse::Ok().json(ChangeFeed::nothing_since(since, &epoch)))
}
