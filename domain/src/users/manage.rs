//! Managing staff accounts: an admin manages users of any branch; a branch
//! manager manages the non-admin users of its own branch. Deactivating a
//! user, or changing its password, role or branch, ends every token it
//! holds at once (the token version the caller extractor checks on every
//! request). The API's `/users` and the console's people pages both manage
//! accounts here.

use deadpool_postgres::GenericClient;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{get, insert, revoke_refresh_tokens, update, NewUser, User, UserPatch};
use crate::db::Pool;
use crate::sync::changes::Op;
use crate::users::passwords;
use crate::{audit, branches, input, Acting, Action, Error, Result, Role};

#[derive(Debug, Deserialize, ToSchema)]
pub struct UserCreate {
    pub email: String,
    /// At least 8 characters.
    pub password: String,
    pub full_name: String,
    pub role: Role,
    #[schema(value_type = String, format = Uuid)]
    pub branch_id: Uuid,
    pub phone: Option<String>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct UserUpdate {
    pub email: Option<String>,
    pub password: Option<String>,
    pub full_name: Option<String>,
    pub role: Option<Role>,
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    pub phone: Option<String>,
    pub is_active: Option<bool>,
}

/// A branch manager may only touch non-admin users of its own branch.
fn may_manage(acting: &Acting, branch_id: Uuid, role: Role) -> Result<()> {
    acting.require(Action::ManageUsers)?;
    if branch_id != acting.branch_id && !acting.any_branch() {
        return Err(Error::forbidden(
            "You can only manage users of your own branch.",
        ));
    }
    if role == Role::Admin && !Action::ManageAdminUsers.permits(acting.role) {
        return Err(Error::forbidden("Only an admin can manage admin users."));
    }
    Ok(())
}

fn email(value: &str) -> Result<String> {
    let e = input::text("email", value, input::max::EMAIL)?.to_lowercase();
    let valid = e.len() <= 254
        && e.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        })
        && !e.contains(char::is_whitespace);
    if !valid {
        return Err(Error::validation(
            "email",
            "`email` must be an email address.",
        ));
    }
    Ok(e)
}

fn full_name(value: &str) -> Result<String> {
    input::required_text("full_name", value, input::max::NAME)
}

fn phone(value: &str) -> Result<String> {
    input::text("phone", value, input::max::CODE)
}

/// Records a user write in the audit log with its before and after values.
async fn audit_user<C: GenericClient + Sync>(
    tx: &C,
    acting: &Acting,
    action: &str,
    before: Option<&User>,
    after: Option<&User>,
) -> Result<()> {
    let subject = after.or(before);
    audit::write_for(
        tx,
        subject.map(|u| u.branch_id),
        audit::Entry {
            actor_id: Some(acting.user_id),
            action,
            entity_type: "user",
            entity_id: subject.map(|u| u.id.to_string()).unwrap_or_default(),
            before: before.and_then(|u| serde_json::to_value(u).ok()),
            after: after.and_then(|u| serde_json::to_value(u).ok()),
        },
    )
    .await
}

fn duplicate_email(e: Error) -> Error {
    match e {
        Error::Conflict(_) => Error::conflict("A user with this email already exists."),
        other => other,
    }
}

async fn live_branch<C: GenericClient + Sync>(client: &C, id: Uuid) -> Result<()> {
    branches::named(client, id).await?;
    Ok(())
}

/// Creates a staff account for `acting` (a branch manager only on its own
/// branch and never an admin), audited as `user.create`.
pub async fn create_user(pool: &Pool, acting: &Acting, body: UserCreate) -> Result<User> {
    may_manage(acting, body.branch_id, body.role)?;
    let email = email(&body.email)?;
    let full_name = full_name(&body.full_name)?;
    passwords::validate_new(&body.password)?;
    let mut client = pool.get().await?;
    live_branch(&client, body.branch_id).await?;
    let password_hash = passwords::hash_blocking(body.password).await?;
    let tx = client.transaction().await?;
    let user = insert(
        &tx,
        NewUser {
            org_id: acting.org_id,
            branch_id: body.branch_id,
            email,
            password_hash,
            full_name,
            phone: phone(body.phone.as_deref().unwrap_or_default())?,
            role: body.role,
        },
    )
    .await
    .map_err(duplicate_email)?;
    audit_user(&tx, acting, "user.create", None, Some(&user)).await?;
    crate::db::commit(tx).await?;
    Ok(user)
}

/// Changes the fields sent of staff account `id` for `acting` (who may
/// `ManageUsers`), audited as `user.update` or `user.role_change`. A change
/// of password, role or branch, or a deactivation, ends the user's
/// sign-ins.
pub async fn update_user(pool: &Pool, acting: &Acting, id: Uuid, body: UserUpdate) -> Result<User> {
    let mut client = pool.get().await?;
    let before = get(&client, id)
        .await?
        .filter(|u| acting.can_see_branch(u.branch_id))
        .ok_or_else(|| Error::not_found("User not found"))?;
    // Both the user as it is and as it would be must be the caller's to manage.
    may_manage(acting, before.branch_id, before.role)?;
    may_manage(
        acting,
        body.branch_id.unwrap_or(before.branch_id),
        body.role.unwrap_or(before.role),
    )?;
    if id == acting.user_id
        && (body.role.is_some_and(|r| r != before.role) || body.is_active == Some(false))
    {
        return Err(Error::bad_request(
            "You cannot change your own role or deactivate yourself.",
        ));
    }
    let mut patch = UserPatch {
        email: body.email.as_deref().map(email).transpose()?,
        full_name: body.full_name.as_deref().map(full_name).transpose()?,
        phone: body.phone.as_deref().map(phone).transpose()?,
        role: body.role,
        branch_id: body.branch_id,
        is_active: body.is_active,
        ..UserPatch::default()
    };
    if let Some(b) = body.branch_id {
        live_branch(&client, b).await?;
    }
    if let Some(p) = body.password.clone() {
        passwords::validate_new(&p)?;
        patch.password_hash = Some(passwords::hash_blocking(p).await?);
    }
    if patch.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let tx = client.transaction().await?;
    let user = update(&tx, id, &patch, Op::Update)
        .await
        .map_err(duplicate_email)?
        .ok_or_else(|| Error::not_found("User not found"))?;
    // The same update bumped the user's token version (a trigger), which
    // ends every token issued before it; the sessions are ended too.
    let ends_tokens = body.password.is_some()
        || (before.is_active && !user.is_active)
        || user.role != before.role
        || user.branch_id != before.branch_id;
    if ends_tokens {
        revoke_refresh_tokens(&tx, id).await?;
    }
    let action = if user.role != before.role {
        "user.role_change"
    } else {
        "user.update"
    };
    audit_user(&tx, acting, action, Some(&before), Some(&user)).await?;
    crate::db::commit(tx).await?;
    Ok(user)
}

/// Deactivates staff account `id` for `acting` (who may `ManageUsers`,
/// never on itself) and revokes its refresh tokens, audited as
/// `user.deactivate`.
pub async fn deactivate_user(pool: &Pool, acting: &Acting, id: Uuid) -> Result<()> {
    if id == acting.user_id {
        return Err(Error::bad_request("You cannot deactivate yourself."));
    }
    let mut client = pool.get().await?;
    let before = get(&client, id)
        .await?
        .filter(|u| acting.can_see_branch(u.branch_id))
        .ok_or_else(|| Error::not_found("User not found"))?;
    may_manage(acting, before.branch_id, before.role)?;
    let tx = client.transaction().await?;
    let patch = UserPatch {
        is_active: Some(false),
        is_deleted: Some(true),
        ..UserPatch::default()
    };
    let user = update(&tx, id, &patch, Op::Delete)
        .await?
        .ok_or_else(|| Error::not_found("User not found"))?;
    revoke_refresh_tokens(&tx, id).await?;
    audit_user(&tx, acting, "user.deactivate", Some(&before), Some(&user)).await?;
    crate::db::commit(tx).await?;
    Ok(())
}
