//! Sync: the conflicts queue (admin, as `/sync/conflicts`) with the base,
//! server and till versions side by side and the fields that differ marked,
//! resolved with the four strategies through the API's own resolve; and the
//! device register (anyone, their branch's; every branch for admins) with
//! register and revoke for those who manage devices, through the API's own
//! functions.

use std::collections::BTreeSet;

use actix_web::web;
use askama::Template;
use serde::Deserialize;
use serde_json::Value;

use super::{
    branch_options, html_status, optional_id, see_other, when, BranchOption, Chrome, NoFields,
    Notice, Outcome, Posted, Staff,
};
use crate::state::AppState;
use domain::input::path_id;
use domain::paging::PageParams;
use domain::sync::conflicts::{self, Conflict, Strategy};
use domain::sync::devices;
use domain::{Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/sync/conflicts", web::get().to(conflicts_page))
        .route("/sync/conflicts/{id}/resolve", web::post().to(resolve))
        .route("/devices", web::get().to(devices_page))
        .route("/devices", web::post().to(register))
        .route("/devices/{id}/revoke", web::post().to(revoke));
}

/// One field of a conflict across its three versions.
pub struct FieldRow {
    pub name: String,
    pub base: String,
    pub server: String,
    pub client: String,
    /// The server's and the till's values differ.
    pub differs: bool,
    /// Words for what differs (the reason a merge may clash).
    pub why: String,
}

pub struct ConflictView {
    pub id: String,
    pub entity: String,
    pub entity_id: String,
    pub branch: String,
    pub device: String,
    pub created: String,
    pub revs: String,
    pub has_base: bool,
    pub fields: Vec<FieldRow>,
    pub error: Option<String>,
}

fn shown(v: Option<&Value>) -> String {
    match v {
        None => "—".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) => "(empty)".to_owned(),
        Some(other) => other.to_string(),
    }
}

/// The fields of the three versions, those the server and the till
/// disagree on first.
pub fn compare(base: Option<&Value>, server: &Value, client: &Value) -> Vec<FieldRow> {
    let keys = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_object)
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    let names: BTreeSet<String> = keys(base)
        .into_iter()
        .chain(keys(Some(server)))
        .chain(keys(Some(client)))
        .collect();
    let mut rows: Vec<FieldRow> = names
        .into_iter()
        .map(|name| {
            let b = base.and_then(|v| v.get(&name));
            let s = server.get(&name);
            let c = client.get(&name);
            let differs = s != c;
            let server_changed = base.is_some() && s != b;
            let client_changed = base.is_some() && c != b;
            let why = match (differs, server_changed, client_changed) {
                (false, _, _) => String::new(),
                (true, true, true) => {
                    "Both changed it since the base: a merge clashes here.".to_owned()
                }
                (true, false, true) => "Changed on the till.".to_owned(),
                (true, true, false) => "Changed on the server.".to_owned(),
                (true, false, false) => "Differs.".to_owned(),
            };
            FieldRow {
                base: shown(b),
                server: shown(s),
                client: shown(c),
                differs,
                why,
                name,
            }
        })
        .collect();
    rows.sort_by_key(|r| !r.differs);
    rows
}

fn view(c: &Conflict, branches: &[domain::branches::Branch]) -> ConflictView {
    let branch = branches
        .iter()
        .find(|b| b.id == c.branch_id)
        .map(|b| format!("{} ({})", b.name, b.code))
        .unwrap_or_else(|| c.branch_id.to_string());
    ConflictView {
        id: c.id.to_string(),
        entity: c.entity_type.clone(),
        entity_id: c.entity_id.clone(),
        branch,
        device: c.device_id.to_string(),
        created: when(c.created_at),
        revs: format!(
            "base revision {}, server revision {}",
            c.base_rev.map_or("—".to_owned(), |r| r.to_string()),
            c.server_rev
        ),
        has_base: c.base_version.is_some(),
        fields: compare(
            c.base_version.as_ref(),
            &c.server_version,
            &c.client_version,
        ),
        error: None,
    }
}

#[derive(Template)]
#[template(path = "console/conflicts.html")]
struct ConflictsPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    conflicts: Vec<ConflictView>,
    total: i64,
}

#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    pub page: Option<i64>,
    pub done: Option<String>,
}

async fn show_conflicts(
    state: &AppState,
    staff: &Staff,
    page: Option<i64>,
    notice: Notice,
    failed: Option<(&str, String)>,
    status: actix_web::http::StatusCode,
) -> Outcome {
    staff.caller.require(Action::ResolveConflicts)?;
    let page = PageParams {
        page,
        page_size: None,
    }
    .resolve(50)?;
    let client = state.pool.get().await?;
    let (items, total) = conflicts::pending(&client, staff.caller.org_id, page).await?;
    let branches = domain::branches::list(&client, None).await?;
    let mut views: Vec<ConflictView> = items.iter().map(|c| view(c, &branches)).collect();
    if let Some((id, message)) = failed {
        if let Some(v) = views.iter_mut().find(|v| v.id == id) {
            v.error = Some(message);
        }
    }
    html_status(
        status,
        &ConflictsPage {
            chrome: Some(Chrome::new(staff, "/console/sync/conflicts")),
            csrf: staff.csrf.clone(),
            notice,
            conflicts: views,
            total,
        },
    )
}

async fn conflicts_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<PageQuery>,
) -> Outcome {
    let notice = match q.done.as_deref() {
        Some("resolved") => Notice::done("The conflict was resolved."),
        _ => Notice::default(),
    };
    show_conflicts(
        &state,
        &staff,
        q.page,
        notice,
        None,
        actix_web::http::StatusCode::OK,
    )
    .await
}

#[derive(Debug, Default, Deserialize)]
pub struct ResolveForm {
    pub strategy: Option<String>,
}

async fn resolve(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<ResolveForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    let attempt = async {
        staff.caller.require(Action::ResolveConflicts)?;
        let strategy = Strategy::required(form.strategy.as_deref())?;
        let conflict = path_id(&id, "Conflict")?;
        conflicts::resolve_one(&state.pool, &staff.caller.acting(), conflict, strategy).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other("/console/sync/conflicts?done=resolved")),
        Err(e @ (Error::Validation { .. } | Error::Conflict(_) | Error::NotFound(_))) => {
            let status = actix_web::ResponseError::status_code(&e);
            let message = Notice::from_error(&e).error.unwrap_or_default();
            let notice = Notice {
                error: Some(format!("The conflict was not resolved: {message}")),
                ..Notice::default()
            };
            show_conflicts(&state, &staff, None, notice, Some((&id, message)), status).await
        }
        Err(e) => Err(e.into()),
    }
}

pub struct DeviceRow {
    pub id: String,
    pub name: String,
    pub branch: String,
    pub status: String,
    pub registered: String,
    pub last_seen: String,
    pub revocable: bool,
}

#[derive(Template)]
#[template(path = "console/devices.html")]
struct DevicesPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    can_manage: bool,
    branches: Vec<BranchOption>,
    name: String,
    rows: Vec<DeviceRow>,
    total: i64,
}

async fn show_devices(
    state: &AppState,
    staff: &Staff,
    page: Option<i64>,
    notice: Notice,
    name: String,
    status: actix_web::http::StatusCode,
) -> Outcome {
    let page = PageParams {
        page,
        page_size: None,
    }
    .resolve(50)?;
    let branch = staff.caller.branch_filter(None)?;
    let client = state.pool.get().await?;
    let (items, total) = devices::register(&client, branch, page).await?;
    let can_manage = Action::ManageDevices.permits(staff.role());
    let rows = items
        .into_iter()
        .map(|r| DeviceRow {
            revocable: can_manage
                && !r.device.is_revoked()
                && staff.caller.can_see_branch(r.device.branch_id),
            id: r.device.id.to_string(),
            name: r.device.name,
            branch: r.branch_name,
            status: r.device.status,
            registered: when(r.device.created_at),
            last_seen: r
                .device
                .last_seen_at
                .map(when)
                .unwrap_or_else(|| "never".to_owned()),
        })
        .collect();
    html_status(
        status,
        &DevicesPage {
            chrome: Some(Chrome::new(staff, "/console/devices")),
            csrf: staff.csrf.clone(),
            notice,
            can_manage,
            branches: branch_options(&client, staff, None)
                .await?
                .into_iter()
                .filter(|b| !b.id.is_empty())
                .collect(),
            name,
            rows,
            total,
        },
    )
}

async fn devices_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<PageQuery>,
) -> Outcome {
    let notice = match q.done.as_deref() {
        Some("registered") => Notice::done("The till was registered."),
        Some("revoked") => {
            Notice::done("The till was revoked; its pushes are refused from now on.")
        }
        _ => Notice::default(),
    };
    show_devices(
        &state,
        &staff,
        q.page,
        notice,
        String::new(),
        actix_web::http::StatusCode::OK,
    )
    .await
}

#[derive(Debug, Default, Deserialize)]
pub struct RegisterForm {
    #[serde(default)]
    pub name: String,
    pub branch_id: Option<String>,
}

async fn register(state: web::Data<AppState>, posted: Posted<RegisterForm>) -> Outcome {
    let Posted { staff, form } = posted;
    let attempt = async {
        let requested = optional_id("branch_id", form.branch_id.as_deref())?;
        staff.caller.require(Action::ManageDevices)?;
        let branch_id = staff.caller.branch_scope(requested)?;
        devices::register_till(&state.pool, &staff.caller.acting(), branch_id, &form.name).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other("/console/devices?done=registered")),
        Err(e @ (Error::Validation { .. } | Error::Forbidden(_))) => {
            let status = actix_web::ResponseError::status_code(&e);
            show_devices(
                &state,
                &staff,
                None,
                Notice::from_error(&e),
                form.name,
                status,
            )
            .await
        }
        Err(e) => Err(e.into()),
    }
}

async fn revoke(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<NoFields>,
) -> Outcome {
    let attempt = async {
        posted.staff.caller.require(Action::ManageDevices)?;
        let device = path_id(&id, "Device")?;
        devices::revoke_till(&state.pool, &posted.staff.caller.acting(), device).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other("/console/devices?done=revoked")),
        Err(e @ (Error::NotFound(_) | Error::Forbidden(_))) => {
            let status = actix_web::ResponseError::status_code(&e);
            show_devices(
                &state,
                &posted.staff,
                None,
                Notice::from_error(&e),
                String::new(),
                status,
            )
            .await
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_changed_on_both_sides_are_named_as_the_merge_clash() {
        let base = json!({"name": "A", "price": 1, "notes": "x"});
        let server = json!({"name": "B", "price": 1, "notes": "x"});
        let client = json!({"name": "C", "price": 2, "notes": "x"});
        let rows = compare(Some(&base), &server, &client);
        assert_eq!(rows.len(), 3);
        let name = rows.iter().find(|r| r.name == "name").unwrap();
        assert!(name.differs);
        assert!(name.why.contains("merge clashes"));
        let price = rows.iter().find(|r| r.name == "price").unwrap();
        assert_eq!(price.why, "Changed on the till.");
        let notes = rows.iter().find(|r| r.name == "notes").unwrap();
        assert!(!notes.differs);
        assert!(!rows.last().unwrap().differs, "differing fields come first");
    }
}
