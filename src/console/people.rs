//! People: users (for those who manage users: create, change role or
//! branch within the rules, deactivate and reactivate) and the branches.
//! Writes go through the same domain functions as `/users` and
//! `/branches`, so a branch manager can touch only non-admin users of its
//! own branch here too. The settings form is `settings.rs`.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use serde::Deserialize;
use uuid::Uuid;

use super::{
    html_status, optional_id, role_label, see_other, when, Chrome, NoFields, Notice, Outcome,
    Posted, Staff,
};
use crate::state::AppState;
use domain::branches::BranchCreate;
use domain::input::path_id;
use domain::paging::PageParams;
use domain::users::manage::{self, UserCreate, UserUpdate};
use domain::{branches, users, Action, Error, Role};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/users", web::get().to(users_page))
        .route("/users", web::post().to(create_user))
        .route("/users/{id}", web::get().to(edit_page))
        .route("/users/{id}", web::post().to(update_user))
        .route("/users/{id}/deactivate", web::post().to(deactivate))
        .route("/users/{id}/reactivate", web::post().to(reactivate))
        .route("/branches", web::get().to(branches_page))
        .route("/branches", web::post().to(create_branch));
}

pub struct Choice {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

/// The roles `staff` may give (an admin role only by an admin).
fn role_choices(staff: &Staff, selected: Option<Role>) -> Vec<Choice> {
    Role::ALL
        .into_iter()
        .filter(|r| *r != Role::Admin || Action::ManageAdminUsers.permits(staff.role()))
        .map(|r| Choice {
            value: r.as_str().to_owned(),
            label: role_label(r).to_owned(),
            selected: selected == Some(r),
        })
        .collect()
}

/// The branches `staff` may put a user on: every branch for those who work
/// on any, else only its own.
async fn branch_choices<C: deadpool_postgres::GenericClient + Sync>(
    c: &C,
    staff: &Staff,
    selected: Option<Uuid>,
) -> Result<Vec<Choice>, Error> {
    let only = (!staff.caller.any_branch()).then_some(staff.caller.branch_id);
    Ok(branches::list(c, only)
        .await?
        .into_iter()
        .map(|b| Choice {
            selected: selected == Some(b.id),
            value: b.id.to_string(),
            label: format!("{} ({})", b.name, b.code),
        })
        .collect())
}

pub struct UserRow {
    pub id: String,
    pub name: String,
    pub email: String,
    pub role: String,
    pub branch: String,
    pub active: bool,
    pub last_login: String,
}

/// What an account form (create or edit) was sent, to show it again.
#[derive(Debug, Default, Deserialize)]
pub struct AccountForm {
    #[serde(default)]
    pub email: String,
    #[serde(default)]
    pub full_name: String,
    #[serde(default)]
    pub phone: String,
    #[serde(default)]
    pub password: String,
    pub role: Option<String>,
    pub branch_id: Option<String>,
}

#[derive(Template)]
#[template(path = "console/users.html")]
struct UsersPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    search: String,
    rows: Vec<UserRow>,
    total: i64,
    form: AccountForm,
    roles: Vec<Choice>,
    branches: Vec<Choice>,
}

#[derive(Debug, Default, Deserialize)]
pub struct UsersQuery {
    pub search: Option<String>,
    pub page: Option<i64>,
    pub done: Option<String>,
}

async fn show_users(
    state: &AppState,
    staff: &Staff,
    q: &UsersQuery,
    notice: Notice,
    form: AccountForm,
    code: StatusCode,
) -> Outcome {
    // As `GET /users`: the role first, then the branch.
    staff.caller.require(Action::ManageUsers)?;
    let page = PageParams {
        page: q.page,
        page_size: Some(50),
    }
    .resolve(50)?;
    let filter = users::ListFilter {
        branch_id: staff.caller.branch_filter(None)?,
        role: None,
        search: q.search.clone(),
    };
    let client = state.pool.get().await?;
    let (items, total) = users::list(&client, &filter, page).await?;
    let all_branches = branches::list(&client, None).await?;
    let branch_name = |id: Uuid| {
        all_branches
            .iter()
            .find(|b| b.id == id)
            .map_or_else(|| id.to_string(), |b| b.name.clone())
    };
    let rows = items
        .into_iter()
        .map(|u| UserRow {
            id: u.id.to_string(),
            name: u.full_name,
            email: u.email,
            role: role_label(u.role).to_owned(),
            branch: branch_name(u.branch_id),
            active: u.is_active,
            last_login: u
                .last_login_at
                .map(when)
                .unwrap_or_else(|| "never".to_owned()),
        })
        .collect();
    let role = form.role.as_deref().and_then(Role::parse);
    let branch = form
        .branch_id
        .as_deref()
        .and_then(|b| Uuid::parse_str(b).ok());
    html_status(
        code,
        &UsersPage {
            chrome: Some(Chrome::new(staff, "/console/users")),
            csrf: staff.csrf.clone(),
            notice,
            search: q.search.clone().unwrap_or_default(),
            rows,
            total,
            roles: role_choices(staff, role.or(Some(Role::Cashier))),
            branches: branch_choices(&client, staff, branch.or(Some(staff.caller.branch_id)))
                .await?,
            form,
        },
    )
}

async fn users_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<UsersQuery>,
) -> Outcome {
    let notice = match q.done.as_deref() {
        Some("created") => Notice::done("The account was created."),
        Some("updated") => Notice::done("The account was changed."),
        Some("deactivated") => {
            Notice::done("The account was deactivated; it is signed out everywhere.")
        }
        Some("reactivated") => Notice::done("The account was reactivated."),
        _ => Notice::default(),
    };
    show_users(
        &state,
        &staff,
        &q,
        notice,
        AccountForm::default(),
        StatusCode::OK,
    )
    .await
}

fn role_field(field: &str, v: Option<&str>) -> Result<Option<Role>, Error> {
    match v.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => Role::parse(s)
            .map(Some)
            .ok_or_else(|| Error::validation(field, "Choose a role from the list.")),
    }
}

async fn create_user(state: web::Data<AppState>, posted: Posted<AccountForm>) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ManageUsers)?;
    let attempt = async {
        let role = role_field("role", form.role.as_deref())?
            .ok_or_else(|| Error::validation("role", "Choose a role."))?;
        let branch_id =
            optional_id("branch_id", form.branch_id.as_deref())?.unwrap_or(staff.caller.branch_id);
        let body = UserCreate {
            email: form.email.clone(),
            password: form.password.clone(),
            full_name: form.full_name.clone(),
            role,
            branch_id,
            phone: Some(form.phone.clone()),
        };
        manage::create_user(&state.pool, &staff.caller.acting(), body).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other("/console/users?done=created")),
        Err(e @ (Error::Validation { .. } | Error::Forbidden(_) | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            let mut notice = Notice::from_error(&e);
            if matches!(e, Error::Conflict(_)) {
                notice.field = Some("email".to_owned());
            }
            let form = AccountForm {
                password: String::new(),
                ..form
            };
            show_users(&state, &staff, &UsersQuery::default(), notice, form, code).await
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Template)]
#[template(path = "console/user_edit.html")]
struct EditPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    id: String,
    email: String,
    full_name: String,
    phone: String,
    active: bool,
    is_self: bool,
    roles: Vec<Choice>,
    branches: Vec<Choice>,
}

/// The account `raw_id` as `staff` may manage it (404 for one of another
/// branch, as `GET /users/{id}`).
async fn managed_user(state: &AppState, staff: &Staff, raw_id: &str) -> Result<users::User, Error> {
    staff.caller.require(Action::ManageUsers)?;
    let id = Uuid::parse_str(raw_id).map_err(|_| Error::not_found("User not found"))?;
    let client = state.pool.get().await?;
    users::get(&client, id)
        .await?
        .filter(|u| staff.caller.can_see_branch(u.branch_id))
        .ok_or_else(|| Error::not_found("User not found"))
}

async fn show_edit(
    state: &AppState,
    staff: &Staff,
    raw_id: &str,
    notice: Notice,
    sent: Option<&AccountForm>,
    code: StatusCode,
) -> Outcome {
    let user = managed_user(state, staff, raw_id).await?;
    let client = state.pool.get().await?;
    let role = sent
        .and_then(|f| f.role.as_deref())
        .and_then(Role::parse)
        .unwrap_or(user.role);
    let branch = sent
        .and_then(|f| f.branch_id.as_deref())
        .and_then(|b| Uuid::parse_str(b).ok())
        .unwrap_or(user.branch_id);
    let mut roles = role_choices(staff, Some(role));
    if !roles.iter().any(|r| r.selected) {
        // An admin account seen by someone who cannot give the role: shown,
        // and the API refuses any change to it.
        roles.insert(
            0,
            Choice {
                value: user.role.as_str().to_owned(),
                label: role_label(user.role).to_owned(),
                selected: true,
            },
        );
    }
    html_status(
        code,
        &EditPage {
            chrome: Some(Chrome::new(staff, "/console/users")),
            csrf: staff.csrf.clone(),
            notice,
            id: user.id.to_string(),
            email: sent.map_or(user.email.clone(), |f| f.email.clone()),
            full_name: sent.map_or(user.full_name.clone(), |f| f.full_name.clone()),
            phone: sent.map_or(user.phone.clone(), |f| f.phone.clone()),
            active: user.is_active,
            is_self: user.id == staff.caller.user_id,
            roles,
            branches: branch_choices(&client, staff, Some(branch)).await?,
        },
    )
}

async fn edit_page(state: web::Data<AppState>, staff: Staff, id: web::Path<String>) -> Outcome {
    show_edit(&state, &staff, &id, Notice::default(), None, StatusCode::OK).await
}

/// Refusals the account forms show in words; anything else is a page error.
fn shown_on_form(e: &Error) -> bool {
    matches!(
        e,
        Error::Validation { .. } | Error::Forbidden(_) | Error::Conflict(_)
    )
}

async fn update_user(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<AccountForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    let attempt = async {
        let before = managed_user(&state, &staff, &id).await?;
        let role = role_field("role", form.role.as_deref())?;
        let branch_id = optional_id("branch_id", form.branch_id.as_deref())?;
        let changed = |new: &str, old: &str| (new.trim() != old).then(|| new.to_owned());
        let body = UserUpdate {
            email: changed(&form.email, &before.email),
            full_name: changed(&form.full_name, &before.full_name),
            phone: changed(&form.phone, &before.phone),
            password: (!form.password.is_empty()).then(|| form.password.clone()),
            role: role.filter(|r| *r != before.role),
            branch_id: branch_id.filter(|b| *b != before.branch_id),
            is_active: None,
        };
        update_account(&state, &staff, &id, body).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other("/console/users?done=updated")),
        Err(e) if shown_on_form(&e) => {
            let code = actix_web::ResponseError::status_code(&e);
            let mut notice = Notice::from_error(&e);
            if matches!(e, Error::Conflict(_)) {
                notice.field = Some("email".to_owned());
            }
            show_edit(&state, &staff, &id, notice, Some(&form), code).await
        }
        Err(e) => Err(e.into()),
    }
}

/// Changes account `raw_id` as `/users/{id}` does: the role first, then the
/// id, then the domain's rules.
async fn update_account(
    state: &AppState,
    staff: &Staff,
    raw_id: &str,
    body: UserUpdate,
) -> Result<users::User, Error> {
    staff.caller.require(Action::ManageUsers)?;
    let id = path_id(raw_id, "User")?;
    manage::update_user(&state.pool, &staff.caller.acting(), id, body).await
}

async fn set_active(state: &AppState, raw_id: &str, staff: Staff, active: bool) -> Outcome {
    let body = UserUpdate {
        is_active: Some(active),
        ..UserUpdate::default()
    };
    match update_account(state, &staff, raw_id, body).await {
        Ok(_) if active => Ok(see_other("/console/users?done=reactivated")),
        Ok(_) => Ok(see_other("/console/users?done=deactivated")),
        Err(e) if shown_on_form(&e) => {
            let code = actix_web::ResponseError::status_code(&e);
            show_edit(state, &staff, raw_id, Notice::from_error(&e), None, code).await
        }
        Err(e) => Err(e.into()),
    }
}

async fn deactivate(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<NoFields>,
) -> Outcome {
    set_active(&state, &id, posted.staff, false).await
}

async fn reactivate(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<NoFields>,
) -> Outcome {
    set_active(&state, &id, posted.staff, true).await
}

pub struct BranchRow {
    pub name: String,
    pub code: String,
    pub city: String,
    pub currency: String,
    pub active: bool,
    pub users: i64,
}

/// What the new-branch form was sent.
#[derive(Debug, Default, Deserialize)]
pub struct BranchForm {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub city: String,
    #[serde(default)]
    pub address: String,
    #[serde(default)]
    pub currency_code: String,
}

#[derive(Template)]
#[template(path = "console/branches.html")]
struct BranchesPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    can_manage: bool,
    form: BranchForm,
    rows: Vec<BranchRow>,
}

async fn branches_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<DoneQuery>,
) -> Outcome {
    let notice = match q.done.as_deref() {
        Some("created") => Notice::done("The branch was created."),
        _ => Notice::default(),
    };
    show_branches(
        &state,
        &staff,
        notice,
        BranchForm::default(),
        StatusCode::OK,
    )
    .await
}

async fn create_branch(state: web::Data<AppState>, posted: Posted<BranchForm>) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ManageBranches)?;
    let blank_is_none = |v: &str| (!v.trim().is_empty()).then(|| v.to_owned());
    let body = BranchCreate {
        code: form.code.clone(),
        name: form.name.clone(),
        city: blank_is_none(&form.city),
        vat_number: None,
        address: blank_is_none(&form.address),
        image_url: None,
        currency_code: blank_is_none(&form.currency_code),
    };
    match branches::create_branch(&state.pool, &staff.caller.acting(), body).await {
        Ok(_) => Ok(see_other("/console/branches?done=created")),
        Err(e) if shown_on_form(&e) => {
            let code = actix_web::ResponseError::status_code(&e);
            let mut notice = Notice::from_error(&e);
            if matches!(e, Error::Conflict(_)) {
                notice.field = Some("code".to_owned());
            }
            show_branches(&state, &staff, notice, form, code).await
        }
        Err(e) => Err(e.into()),
    }
}

/// As `GET /branches`: every branch for those who work on any, else its
/// own; admins also get the form to add one.
async fn show_branches(
    state: &AppState,
    staff: &Staff,
    notice: Notice,
    form: BranchForm,
    code: StatusCode,
) -> Outcome {
    let only = (!staff.caller.any_branch()).then_some(staff.caller.branch_id);
    let client = state.pool.get().await?;
    let mut rows = Vec::new();
    for b in branches::list(&client, only).await? {
        rows.push(BranchRow {
            users: branches::active_user_count(&client, b.id).await?,
            name: b.name,
            code: b.code,
            city: b.city,
            currency: b.currency_code,
            active: b.is_active,
        });
    }
    html_status(
        code,
        &BranchesPage {
            chrome: Some(Chrome::new(staff, "/console/branches")),
            csrf: staff.csrf.clone(),
            notice,
            can_manage: Action::ManageBranches.permits(staff.role()),
            form,
            rows,
        },
    )
}

#[derive(Debug, Default, Deserialize)]
pub struct DoneQuery {
    pub done: Option<String>,
}
