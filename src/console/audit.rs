//! The audit log (admins and auditors, as `/audit-log`): who changed what
//! and when, filterable by entity, actor (click a name) and date, and for
//! admins by branch, newest first, 50 a page.

use actix_web::{web, HttpRequest};
use askama::Template;
use serde::Deserialize;

use super::{
    branch_options, html_status, optional_id, when, BranchOption, Chrome, Notice, Outcome, Staff,
};
use crate::state::AppState;
use domain::audit::{self, ListFilter};
use domain::paging::{Page, PageParams};
use domain::window::DateWindow;
use domain::{Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/audit", web::get().to(page));
}

const PAGE_SIZE: i64 = 50;

#[derive(Debug, Default, Deserialize)]
pub struct AuditQuery {
    pub entity_type: Option<String>,
    pub entity_id: Option<String>,
    pub actor_id: Option<String>,
    pub branch_id: Option<String>,
    pub from_date: Option<String>,
    pub to_date: Option<String>,
    pub page: Option<i64>,
}

pub struct EntryView {
    pub when: String,
    pub actor: String,
    pub actor_href: String,
    pub action: String,
    pub entity: String,
    pub entity_id: String,
    pub before: String,
    pub after: String,
}

#[derive(Template)]
#[template(path = "console/audit.html")]
struct AuditPage {
    chrome: Option<Chrome>,
    notice: Notice,
    entity_type: String,
    entity_id: String,
    actor_id: String,
    actor_name: String,
    from_date: String,
    to_date: String,
    branches: Vec<BranchOption>,
    rows: Vec<EntryView>,
    total: i64,
    page: i64,
    prev_href: String,
    next_href: String,
}

fn exact(v: Option<&str>) -> Option<String> {
    v.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The page's link with `changes` applied to its query.
fn href(req: &HttpRequest, changes: &[(&str, &str)]) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(req.query_string().as_bytes()) {
        if !changes.iter().any(|(c, _)| *c == k) {
            q.append_pair(&k, &v);
        }
    }
    for (k, v) in changes {
        if !v.is_empty() {
            q.append_pair(k, v);
        }
    }
    format!("/console/audit?{}", q.finish())
}

async fn page(
    req: HttpRequest,
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<AuditQuery>,
) -> Outcome {
    // As `GET /audit-log`: the role first.
    staff.caller.require(Action::ReadAuditLog)?;
    let client = state.pool.get().await?;
    let requested = optional_id("branch_id", q.branch_id.as_deref()).unwrap_or(None);
    let mut view = AuditPage {
        chrome: Some(Chrome::new(&staff, "/console/audit")),
        notice: Notice::default(),
        entity_type: q.entity_type.clone().unwrap_or_default(),
        entity_id: q.entity_id.clone().unwrap_or_default(),
        actor_id: q.actor_id.clone().unwrap_or_default(),
        actor_name: String::new(),
        from_date: q.from_date.clone().unwrap_or_default(),
        to_date: q.to_date.clone().unwrap_or_default(),
        branches: branch_options(&client, &staff, requested).await?,
        rows: Vec::new(),
        total: 0,
        page: 1,
        prev_href: String::new(),
        next_href: String::new(),
    };
    let read = async {
        let branch = staff
            .caller
            .branch_filter(optional_id("branch_id", q.branch_id.as_deref())?)?;
        let paging = PageParams {
            page: q.page,
            page_size: Some(PAGE_SIZE),
        }
        .resolve(PAGE_SIZE)?;
        let (from, until) = DateWindow::parse(q.from_date.as_deref(), q.to_date.as_deref())?
            .bounds(&client)
            .await?;
        let filter = ListFilter {
            entity_type: exact(q.entity_type.as_deref()),
            entity_id: exact(q.entity_id.as_deref()),
            actor_id: optional_id("actor_id", q.actor_id.as_deref())?,
            branch,
            from,
            until,
        };
        let (items, total) = audit::list(&client, &filter, paging).await?;
        Ok::<(Vec<audit::AuditRow>, i64, Page), Error>((items, total, paging))
    };
    match read.await {
        Ok((items, total, paging)) => {
            let json = |v: &Option<serde_json::Value>| {
                v.as_ref().map(|j| j.to_string()).unwrap_or_default()
            };
            view.rows = items
                .iter()
                .map(|r| {
                    let actor_id = r.actor_id.map(|a| a.to_string()).unwrap_or_default();
                    if !actor_id.is_empty() && actor_id == view.actor_id {
                        view.actor_name = r.actor_name.clone().unwrap_or_default();
                    }
                    EntryView {
                        when: when(r.created_at),
                        actor: r
                            .actor_name
                            .clone()
                            .unwrap_or_else(|| "(the system)".to_owned()),
                        actor_href: if actor_id.is_empty() {
                            String::new()
                        } else {
                            href(&req, &[("actor_id", &actor_id), ("page", "")])
                        },
                        action: r.action.clone(),
                        entity: r.entity_type.clone(),
                        entity_id: r.entity_id.clone().unwrap_or_default(),
                        before: json(&r.before),
                        after: json(&r.after),
                    }
                })
                .collect();
            view.total = total;
            view.page = paging.page;
            if paging.page > 1 {
                view.prev_href = href(&req, &[("page", &(paging.page - 1).to_string())]);
            }
            if paging.page * PAGE_SIZE < total {
                view.next_href = href(&req, &[("page", &(paging.page + 1).to_string())]);
            }
            html_status(actix_web::http::StatusCode::OK, &view)
        }
        Err(e @ (Error::Validation { .. } | Error::Forbidden(_))) => {
            view.notice = Notice::from_error(&e);
            html_status(actix_web::ResponseError::status_code(&e), &view)
        }
        Err(e) => Err(e.into()),
    }
}
