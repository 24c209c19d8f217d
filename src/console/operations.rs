//! Operations (admin, `Action::OperateActors`): the live actors of this
//! process (mailbox depth, capacity, refusals and waits per branch and
//! device, refreshed every few seconds with htmx, or by reloading), the
//! per-branch tuning form, the connection pool and the requests served.
//! Reads and writes go through the same domain functions as `/ops/actors`
//! (`domain::actor_tuning`).

use actix_web::web;
use askama::Template;
use serde::Deserialize;

use super::session::Background;
use super::{html, html_status, see_other, Chrome, NoFields, Notice, Outcome, Posted, Staff};
use crate::state::AppState;
use crate::telemetry;
use domain::actor_tuning::{self, ActorList, BranchTuningWrite};
use domain::input::path_id;
use domain::{Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/operations", web::get().to(page))
        .route("/operations/live", web::get().to(live))
        .route("/operations/branches/{id}", web::post().to(set))
        .route("/operations/branches/{id}/reset", web::post().to(reset));
}

pub struct ActorView {
    pub kind: &'static str,
    pub branch: String,
    pub device: String,
    pub depth: i64,
    pub capacity: usize,
    pub batch: String,
    pub refusals: u64,
    pub p99: String,
    pub samples: usize,
}

fn actor_views(list: ActorList) -> Vec<ActorView> {
    list.items
        .into_iter()
        .map(|a| ActorView {
            kind: a.kind,
            branch: a.branch_code.unwrap_or_default(),
            device: a.device_id.map(|d| d.to_string()).unwrap_or_default(),
            depth: a.depth,
            capacity: a.capacity,
            batch: a.sale_batch_max.map(|b| b.to_string()).unwrap_or_default(),
            refusals: a.refusals_last_minute,
            p99: a
                .p99_wait_ms
                .map_or_else(|| "—".to_owned(), |ms| format!("{ms:.2} ms")),
            samples: a.wait_samples,
        })
        .collect()
}

#[derive(Template)]
#[template(path = "console/_actors.html")]
struct LiveFragment {
    actors: Vec<ActorView>,
}

pub struct TuningView {
    pub branch_id: String,
    pub label: String,
    pub mailbox: usize,
    pub mailbox_source: &'static str,
    pub sale_batch_max: usize,
    pub sale_batch_max_source: &'static str,
    pub stored_mailbox: String,
    pub stored_batch: String,
    pub has_stored: bool,
    pub live_capacity: String,
    /// A refusal of this branch's form, and the field it is about.
    pub error: Option<String>,
    pub error_field: String,
}

pub struct RouteView {
    pub route: String,
    pub method: String,
    pub count: u64,
    pub mean_ms: String,
}

#[derive(Template)]
#[template(path = "console/operations.html")]
struct OperationsPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    actors: Vec<ActorView>,
    defaults: String,
    pool: String,
    tuning: Vec<TuningView>,
    routes: Vec<RouteView>,
}

async fn show(
    state: &AppState,
    staff: &Staff,
    notice: Notice,
    failed: Option<(&str, &Error)>,
    code: actix_web::http::StatusCode,
) -> Outcome {
    staff.caller.require(Action::OperateActors)?;
    let list = actor_tuning::actors_of(&state.runtime(), &staff.caller.acting()).await?;
    let d = &list.defaults;
    let defaults = format!(
        "Defaults: branch mailbox {}, device mailbox {}, group commit {} sales; other processes pick up a change within {} ms.",
        d.branch_mailbox, d.device_mailbox, d.sale_batch_max, d.overrides_reload_ms
    );
    let p = state.pool.status();
    let pool = format!(
        "{} connections open of at most {}, {} idle, {} requests waiting for one.",
        p.size, p.max_size, p.available, p.waiting
    );
    let client = state.pool.get().await?;
    let branches = domain::branches::list(&client, None).await?;
    drop(client);
    let mut tuning = Vec::new();
    for b in branches {
        let t = actor_tuning::tuning_of(&state.runtime(), &staff.caller.acting(), b.id).await?;
        let stored = t
            .stored
            .as_ref()
            .map(|s| s.as_override())
            .unwrap_or_default();
        let id = b.id.to_string();
        let (error, error_field) = match failed {
            Some((fid, e)) if fid == id => {
                let n = Notice::from_error(e);
                (n.error, n.field.unwrap_or_default())
            }
            _ => (None, String::new()),
        };
        tuning.push(TuningView {
            label: format!("{} ({})", b.name, b.code),
            mailbox: t.mailbox,
            mailbox_source: t.mailbox_source,
            sale_batch_max: t.sale_batch_max,
            sale_batch_max_source: t.sale_batch_max_source,
            stored_mailbox: stored.mailbox.map(|n| n.to_string()).unwrap_or_default(),
            stored_batch: stored.batch_max.map(|n| n.to_string()).unwrap_or_default(),
            has_stored: t.stored.is_some(),
            live_capacity: t
                .live_capacity
                .map_or_else(|| "not started".to_owned(), |c| c.to_string()),
            error,
            error_field,
            branch_id: id,
        });
    }
    let routes = telemetry::route_figures()
        .into_iter()
        .take(15)
        .map(|r| RouteView {
            route: r.route,
            method: r.method,
            count: r.count,
            mean_ms: format!("{:.1}", r.mean_ms),
        })
        .collect();
    html_status(
        code,
        &OperationsPage {
            chrome: Some(Chrome::new(staff, "/console/operations")),
            csrf: staff.csrf.clone(),
            notice,
            actors: actor_views(list),
            defaults,
            pool,
            tuning,
            routes,
        },
    )
}

#[derive(Debug, Default, Deserialize)]
pub struct DoneQuery {
    pub done: Option<String>,
}

async fn page(state: web::Data<AppState>, staff: Staff, q: web::Query<DoneQuery>) -> Outcome {
    let notice = match q.done.as_deref() {
        Some("saved") => Notice::done("The branch's tuning was saved and applied."),
        Some("reset") => Notice::done("The branch is back to its configured tuning."),
        _ => Notice::default(),
    };
    show(
        &state,
        &staff,
        notice,
        None,
        actix_web::http::StatusCode::OK,
    )
    .await
}

/// The actor table alone, for the page's periodic refresh.
async fn live(state: web::Data<AppState>, Background(staff): Background) -> Outcome {
    staff.caller.require(Action::OperateActors)?;
    let list = actor_tuning::actors_of(&state.runtime(), &staff.caller.acting()).await?;
    html(&LiveFragment {
        actors: actor_views(list),
    })
}

#[derive(Debug, Default, Deserialize)]
pub struct TuningForm {
    pub mailbox: Option<String>,
    pub sale_batch_max: Option<String>,
}

/// A whole number, or blank for "keep the configured value".
fn number(field: &str, v: Option<&str>) -> Result<Option<i64>, Error> {
    match v.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s
            .parse()
            .map(Some)
            .map_err(|_| Error::validation(field, format!("{field} must be a whole number."))),
    }
}

async fn set(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<TuningForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::OperateActors)?;
    let attempt = async {
        let body = BranchTuningWrite {
            mailbox: number("mailbox", form.mailbox.as_deref())?,
            sale_batch_max: number("sale_batch_max", form.sale_batch_max.as_deref())?,
        };
        let branch = path_id(&id, "Branch")?;
        actor_tuning::set_tuning(&state.runtime(), &staff.caller.acting(), branch, body).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other("/console/operations?done=saved")),
        Err(e @ Error::Validation { .. }) => {
            let code = actix_web::ResponseError::status_code(&e);
            show(&state, &staff, Notice::default(), Some((&id, &e)), code).await
        }
        Err(e) => Err(e.into()),
    }
}

async fn reset(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<NoFields>,
) -> Outcome {
    posted.staff.caller.require(Action::OperateActors)?;
    let branch = path_id(&id, "Branch")?;
    actor_tuning::clear_tuning(&state.runtime(), &posted.staff.caller.acting(), branch).await?;
    Ok(see_other("/console/operations?done=reset"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuning_numbers_are_whole_or_blank() {
        assert_eq!(number("mailbox", Some(" 12 ")).unwrap(), Some(12));
        assert_eq!(number("mailbox", Some("")).unwrap(), None);
        assert_eq!(number("mailbox", None).unwrap(), None);
        let e = number("mailbox", Some("1.5")).unwrap_err();
        assert!(matches!(e, Error::Validation { field: Some(f), .. } if f == "mailbox"));
    }
}
