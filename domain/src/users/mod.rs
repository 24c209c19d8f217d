//! Users: the snapshot User shape (never the password hash), reads and writes.

pub mod console_sessions;
pub mod manage;
pub mod passwords;
pub mod rate_limits;
pub mod sessions;
pub mod sign_in;

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::extension::postgres::PgExpr;
use sea_query::{Cond, Expr, ExprTrait, Func, Order, Query, SelectStatement};
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::sync::changes::{self, Change, Op};
use crate::{db, wire, Result, Role};

use crate::paging::{self, Page};

/// The snapshot User shape (flags as 0/1), plus `rev`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct User {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub email: String,
    pub full_name: String,
    pub phone: String,
    pub role: Role,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_active: bool,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_deleted: bool,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub last_login_at: Option<DateTime<Utc>>,
    pub rev: i64,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}

pub const COLUMNS: [&str; 12] = [
    "id",
    "branch_id",
    "email",
    "full_name",
    "phone",
    "role",
    "is_active",
    "is_deleted",
    "last_login_at",
    "rev",
    "created_at",
    "updated_at",
];

impl User {
    /// The user of a row; a stored role this build does not know is an
    /// internal error (the CHECK on `users.role` admits only `Role::ALL`).
    pub fn from_row(r: &Row) -> Result<Self> {
        let role: String = r.get("role");
        let role = Role::parse(&role)
            .ok_or_else(|| crate::Error::internal(format!("unknown role {role}")))?;
        Ok(User {
            id: r.get("id"),
            branch_id: r.get("branch_id"),
            email: r.get("email"),
            full_name: r.get("full_name"),
            phone: r.get("phone"),
            role,
            is_active: r.get("is_active"),
            is_deleted: r.get("is_deleted"),
            last_login_at: r.get("last_login_at"),
            rev: r.get("rev"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
        })
    }
}

fn select() -> SelectStatement {
    Query::select()
        .columns(COLUMNS)
        .from(Table::Users)
        .to_owned()
}

/// A user that exists and is not deleted (it may be deactivated).
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<User>> {
    let q = select()
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    db::fetch_opt(c, &q)
        .await?
        .map(|r| User::from_row(&r))
        .transpose()
}

/// What login needs: the user, its hash and organisation, and the token
/// version read with the hash (tokens issued on this check carry it).
pub struct Credentials {
    pub user: User,
    pub password_hash: String,
    pub org_id: Uuid,
    pub token_version: i64,
}

pub async fn credentials<C: GenericClient + Sync>(
    c: &C,
    email: &str,
) -> Result<Option<Credentials>> {
    let q = select()
        .columns(["password_hash", "org_id", "token_version"])
        .and_where(Func::lower(Expr::col("email")).eq(email.to_lowercase()))
        .to_owned();
    db::fetch_opt(c, &q)
        .await?
        .map(|r| {
            Ok(Credentials {
                user: User::from_row(&r)?,
                password_hash: r.get("password_hash"),
                org_id: r.get("org_id"),
                token_version: r.get("token_version"),
            })
        })
        .transpose()
}

/// The credentials of a live user by id.
pub async fn credentials_of<C: GenericClient + Sync>(
    c: &C,
    id: Uuid,
) -> Result<Option<Credentials>> {
    let q = select()
        .columns(["password_hash", "org_id", "token_version"])
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    db::fetch_opt(c, &q)
        .await?
        .map(|r| {
            Ok(Credentials {
                user: User::from_row(&r)?,
                password_hash: r.get("password_hash"),
                org_id: r.get("org_id"),
                token_version: r.get("token_version"),
            })
        })
        .transpose()
}

/// Sets a new password hash on an active user whose token version is still
/// `expected_version` (a conditional update: a concurrent change that ended
/// the caller's tokens first makes this a no-op, `None`). The trigger bumps
/// the version; the new one is returned with the user. Run it in a
/// transaction.
pub async fn set_password<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    password_hash: String,
    expected_version: i64,
) -> Result<Option<(User, i64)>> {
    let rev = changes::allocate(tx).await?;
    let q = Query::update()
        .table(Table::Users)
        .value("password_hash", password_hash)
        .value("rev", rev)
        .value("updated_at", Utc::now())
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("token_version").eq(expected_version))
        .and_where(Expr::col("is_active").eq(true))
        .and_where(Expr::col("is_deleted").eq(false))
        .returning(Query::returning().columns(COLUMNS.iter().copied().chain(["token_version"])))
        .to_owned();
    let Some(row) = db::fetch_opt(tx, &q).await? else {
        return Ok(None);
    };
    let user = User::from_row(&row)?;
    emit(tx, rev, &user, Op::Update).await?;
    Ok(Some((user, row.get("token_version"))))
}

pub async fn org_of<C: GenericClient + Sync>(c: &C, user_id: Uuid) -> Result<Option<Uuid>> {
    let q = Query::select()
        .column("org_id")
        .from(Table::Users)
        .and_where(Expr::col("id").eq(user_id))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| r.get(0)))
}

/// Records a sign-in. `last_login_at` is in the synced User, so the write
/// gets its rev and change row like any other (`updated_at` stays: the
/// record itself did not change). Run it in a transaction.
pub async fn touch_login<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<Option<User>> {
    let rev = changes::allocate(tx).await?;
    let q = Query::update()
        .table(Table::Users)
        .value("last_login_at", Utc::now())
        .value("rev", rev)
        .and_where(Expr::col("id").eq(id))
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    let Some(row) = db::fetch_opt(tx, &q).await? else {
        return Ok(None);
    };
    let user = User::from_row(&row)?;
    emit(tx, rev, &user, Op::Update).await?;
    Ok(Some(user))
}

#[derive(Debug, Default)]
pub struct ListFilter {
    pub branch_id: Option<Uuid>,
    pub role: Option<Role>,
    pub search: Option<String>,
}

/// Live users, by name, with the total before paging.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ListFilter,
    page: Page,
) -> Result<(Vec<User>, i64)> {
    let mut base = Query::select()
        .from(Table::Users)
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    if let Some(b) = f.branch_id {
        base.and_where(Expr::col("branch_id").eq(b));
    }
    if let Some(r) = f.role {
        base.and_where(Expr::col("role").eq(r.as_str()));
    }
    if let Some(s) = f.search.as_deref().filter(|s| !s.trim().is_empty()) {
        let pattern = format!("%{}%", escape_like(s.trim()));
        base.cond_where(
            Cond::any()
                .add(Expr::col("full_name").ilike(pattern.clone()))
                .add(Expr::col("email").ilike(pattern)),
        );
    }
    let (rows, total) = paging::fetch(c, base, "id", page, |q| {
        q.columns(COLUMNS)
            .order_by("full_name", Order::Asc)
            .order_by("id", Order::Asc);
    })
    .await?;
    let users = rows.iter().map(User::from_row).collect::<Result<_>>()?;
    Ok((users, total))
}

/// Escapes `%`, `_` and `\` so user input matches literally inside LIKE.
pub fn escape_like(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

pub struct NewUser {
    pub org_id: Uuid,
    pub branch_id: Uuid,
    pub email: String,
    pub password_hash: String,
    pub full_name: String,
    pub phone: String,
    pub role: Role,
}

pub async fn insert<C: GenericClient + Sync>(tx: &C, u: NewUser) -> Result<User> {
    let rev = changes::allocate(tx).await?;
    let q = Query::insert()
        .into_table(Table::Users)
        .columns([
            "id",
            "org_id",
            "branch_id",
            "email",
            "password_hash",
            "full_name",
            "phone",
            "role",
            "rev",
        ])
        .values_panic([
            Uuid::now_v7().into(),
            u.org_id.into(),
            u.branch_id.into(),
            u.email.into(),
            u.password_hash.into(),
            u.full_name.into(),
            u.phone.into(),
            u.role.as_str().into(),
            rev.into(),
        ])
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    let user = User::from_row(&db::fetch_one(tx, &q).await?)?;
    emit(tx, rev, &user, Op::Create).await?;
    Ok(user)
}

/// The columns of `users` an update may set.
#[derive(sea_query::Iden, Clone, Copy, Debug)]
enum Users {
    Table,
    Id,
    Email,
    FullName,
    Phone,
    Role,
    BranchId,
    IsActive,
    IsDeleted,
    PasswordHash,
    Rev,
    UpdatedAt,
}

/// What an update of a user changes: each field given is set, the others
/// stay as they are. Values arrive checked (`manage` checks them).
#[derive(Debug, Default, Clone)]
pub struct UserPatch {
    pub email: Option<String>,
    pub full_name: Option<String>,
    pub phone: Option<String>,
    pub role: Option<Role>,
    pub branch_id: Option<Uuid>,
    pub is_active: Option<bool>,
    pub is_deleted: Option<bool>,
    pub password_hash: Option<String>,
}

impl UserPatch {
    /// The patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.values().is_empty()
    }

    fn values(&self) -> Vec<(Users, Expr)> {
        let mut out: Vec<(Users, Expr)> = Vec::new();
        let mut set = |col: Users, v: Option<sea_query::Value>| {
            if let Some(v) = v {
                out.push((col, Expr::val(v)));
            }
        };
        set(Users::Email, self.email.clone().map(Into::into));
        set(Users::FullName, self.full_name.clone().map(Into::into));
        set(Users::Phone, self.phone.clone().map(Into::into));
        set(Users::Role, self.role.map(|r| r.as_str().into()));
        set(Users::BranchId, self.branch_id.map(Into::into));
        set(Users::IsActive, self.is_active.map(Into::into));
        set(Users::IsDeleted, self.is_deleted.map(Into::into));
        set(
            Users::PasswordHash,
            self.password_hash.clone().map(Into::into),
        );
        out
    }
}

/// Applies `patch` to a live user, with a new rev; `None` when there is
/// none.
pub async fn update<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    patch: &UserPatch,
    op: Op,
) -> Result<Option<User>> {
    let rev = changes::allocate(tx).await?;
    let mut values = patch.values();
    values.push((Users::Rev, Expr::val(rev)));
    values.push((Users::UpdatedAt, Expr::val(Utc::now())));
    let q = Query::update()
        .table(Users::Table)
        .values(values)
        .and_where(Expr::col(Users::Id).eq(id))
        .and_where(Expr::col(Users::IsDeleted).eq(false))
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    let Some(row) = db::fetch_opt(tx, &q).await? else {
        return Ok(None);
    };
    let user = User::from_row(&row)?;
    emit(tx, rev, &user, op).await?;
    Ok(Some(user))
}

async fn emit<C: GenericClient + Sync>(tx: &C, rev: i64, u: &User, op: Op) -> Result<()> {
    let change = Change {
        entity: "user",
        entity_id: u.id.to_string(),
        op,
        branch_id: Some(u.branch_id),
        payload: serde_json::to_value(u).map_err(crate::Error::internal)?,
    };
    changes::append(tx, rev, change).await
}

/// Ends every session and refresh token of the user (deactivation,
/// password, role or branch change). The token-version bump of the same
/// change already refuses them; this keeps the rows telling the truth.
pub async fn revoke_refresh_tokens<C: GenericClient + Sync>(c: &C, user_id: Uuid) -> Result<()> {
    let now = Utc::now();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH s AS (UPDATE auth_sessions SET revoked_at = {now}
                      WHERE user_id = {user_id} AND revoked_at IS NULL)
           UPDATE refresh_tokens SET revoked_at = {now}
           WHERE user_id = {user_id} AND revoked_at IS NULL"#
    );
    db::raw_all(c, &q.sql, q.values).await?;
    Ok(())
}
