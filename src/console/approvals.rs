//! Approvals (refunds among them): the caller's branch's requests (every
//! branch for admins), pending first by default, with approve and reject
//! for those who decide (`Action::DecideApprovals`) on requests they did
//! not make. Deciding goes through `domain::approvals::decide_one`, as the API
//! does, so the rules (never the requester, only a pending request, the
//! branch) are the same.

use std::collections::HashMap;

use actix_web::web;
use askama::Template;
use serde::Deserialize;
use uuid::Uuid;

use super::reports::Tab;
use super::{html_status, see_other, when, Chrome, NoFields, Notice, Outcome, Posted, Staff};
use crate::state::AppState;
use domain::approvals;
use domain::input::path_id;
use domain::paging::PageParams;
use domain::{users, Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/approvals", web::get().to(page))
        .route("/approvals/{id}/approve", web::post().to(approve))
        .route("/approvals/{id}/reject", web::post().to(reject));
}

#[derive(Debug, Default, Deserialize)]
pub struct ApprovalQuery {
    pub status: Option<String>,
    pub page: Option<i64>,
    pub done: Option<String>,
}

pub struct Row {
    pub id: String,
    pub kind: String,
    pub reference: String,
    pub reason: String,
    pub requested_by: String,
    pub requested_at: String,
    pub status: String,
    pub decided: String,
    /// The caller may decide it (role, pending, not theirs).
    pub decidable: bool,
    /// Why the caller may not decide a pending request.
    pub why_not: String,
}

#[derive(Template)]
#[template(path = "console/approvals.html")]
struct ApprovalsPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    tabs: Vec<Tab>,
    rows: Vec<Row>,
    total: i64,
}

async fn show(
    state: &AppState,
    staff: &Staff,
    status: Option<&str>,
    page: Option<i64>,
    notice: Notice,
    code: actix_web::http::StatusCode,
) -> Outcome {
    let status = match status.map(str::trim) {
        None | Some("") | Some("pending") => Some("pending"),
        Some("all") => None,
        Some(s) if approvals::STATUSES.contains(&s) => Some(s),
        Some(_) => {
            return Err(Error::validation(
                "status",
                "status must be pending, approved or rejected.",
            )
            .into())
        }
    };
    let page = PageParams {
        page,
        page_size: None,
    }
    .resolve(20)?;
    let branch = staff.caller.branch_filter(None)?;
    let client = state.pool.get().await?;
    let (items, total) = approvals::list(&client, branch, status, page).await?;
    let mut names: HashMap<Uuid, String> = HashMap::new();
    for id in items
        .iter()
        .flat_map(|a| [Some(a.requested_by), a.approved_by])
        .flatten()
    {
        if let std::collections::hash_map::Entry::Vacant(slot) = names.entry(id) {
            let name = users::get(&client, id)
                .await?
                .map_or_else(|| "(a former user)".to_owned(), |u| u.full_name);
            slot.insert(name);
        }
    }
    let may_decide = Action::DecideApprovals.permits(staff.role());
    let name = |id: &Uuid| names.get(id).cloned().unwrap_or_default();
    let rows = items
        .iter()
        .map(|a| {
            let pending = a.status == "pending";
            let own = a.requested_by == staff.caller.user_id;
            let why_not = match (pending, may_decide, own) {
                (false, _, _) => String::new(),
                (true, false, _) => "Your role does not decide requests.".to_owned(),
                (true, true, true) => "Your own request: another manager decides it.".to_owned(),
                (true, true, false) => String::new(),
            };
            Row {
                id: a.id.to_string(),
                kind: a.kind.clone(),
                reference: a.reference_id.clone().unwrap_or_default(),
                reason: a.reason.clone(),
                requested_by: if own {
                    format!("{} (you)", name(&a.requested_by))
                } else {
                    name(&a.requested_by)
                },
                requested_at: when(a.created_at),
                status: a.status.clone(),
                decided: match (a.approved_by, a.decided_at) {
                    (Some(by), Some(at)) => format!("{} by {}", when(at), name(&by)),
                    _ => String::new(),
                },
                decidable: pending && may_decide && !own,
                why_not,
            }
        })
        .collect();
    let current = status.unwrap_or("all");
    let tabs = [
        ("/console/approvals?status=pending", "Pending", "pending"),
        ("/console/approvals?status=approved", "Approved", "approved"),
        ("/console/approvals?status=rejected", "Rejected", "rejected"),
        ("/console/approvals?status=all", "All", "all"),
    ]
    .into_iter()
    .map(|(href, label, key)| Tab {
        href,
        label,
        current: key == current,
    })
    .collect();
    html_status(
        code,
        &ApprovalsPage {
            chrome: Some(Chrome::new(staff, "/console/approvals")),
            csrf: staff.csrf.clone(),
            notice,
            tabs,
            rows,
            total,
        },
    )
}

async fn page(state: web::Data<AppState>, staff: Staff, q: web::Query<ApprovalQuery>) -> Outcome {
    let notice = match q.done.as_deref() {
        Some("approved") => Notice::done("The request was approved."),
        Some("rejected") => Notice::done("The request was rejected."),
        _ => Notice::default(),
    };
    show(
        &state,
        &staff,
        q.status.as_deref(),
        q.page,
        notice,
        actix_web::http::StatusCode::OK,
    )
    .await
}

async fn decided(
    state: &AppState,
    posted: Posted<NoFields>,
    id: &str,
    status: &'static str,
) -> Outcome {
    let staff = posted.staff;
    let decision = async {
        staff.caller.require(Action::DecideApprovals)?;
        let id = path_id(id, "Approval")?;
        approvals::decide_one(
            &state.pool,
            &state.actors,
            &staff.caller.acting(),
            id,
            status,
        )
        .await
    };
    match decision.await {
        Ok(_) => Ok(see_other(&format!("/console/approvals?done={status}"))),
        Err(e @ (Error::Forbidden(_) | Error::NotFound(_) | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            show(state, &staff, None, None, Notice::from_error(&e), code).await
        }
        Err(e) => Err(e.into()),
    }
}

async fn approve(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<NoFields>,
) -> Outcome {
    decided(&state, posted, &id, "approved").await
}

async fn reject(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<NoFields>,
) -> Outcome {
    decided(&state, posted, &id, "rejected").await
}
