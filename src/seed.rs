//! Bootstrap data: the first admin (`create-admin`) and the demo chain
//! (`seed-demo`).

use deadpool_postgres::{GenericClient, Pool};
use sea_query::{Expr, ExprTrait, Query};
use uuid::Uuid;

use crate::auth::passwords;
use crate::store::branches::{self, BranchFields};
use crate::store::users::{self, NewUser};
use actors::{db, Result, Role};

/// Password of every demo user (documented in the README).
pub const DEMO_PASSWORD: &str = "Demo-Pass-2026";
/// The demo chain's branches: code, name, city.
pub const DEMO_BRANCHES: [(&str, &str, &str); 3] = [
    ("HQ", "Head Office Pharmacy", "Kampala"),
    ("KLA", "Kampala Road Pharmacy", "Kampala"),
    ("EBB", "Entebbe Pharmacy", "Entebbe"),
];

/// The organisation, created on first use.
pub async fn ensure_organisation<C: GenericClient + Sync>(c: &C, name: &str) -> Result<Uuid> {
    let q = Query::select()
        .column("id")
        .from("organisations")
        .limit(1)
        .to_owned();
    if let Some(row) = db::fetch_opt(c, &q).await? {
        return Ok(row.get(0));
    }
    let id = Uuid::now_v7();
    let insert = Query::insert()
        .into_table("organisations")
        .columns(["id", "name"])
        .values_panic([id.into(), name.into()])
        .to_owned();
    db::execute(c, &insert).await?;
    Ok(id)
}

async fn branch_by_code<C: GenericClient + Sync>(c: &C, code: &str) -> Result<Option<Uuid>> {
    let q = Query::select()
        .column("id")
        .from("branches")
        .and_where(Expr::col("code").eq(code))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| r.get(0)))
}

async fn ensure_branch<C: GenericClient + Sync>(
    c: &C,
    org: Uuid,
    code: &str,
    name: &str,
    city: &str,
) -> Result<Uuid> {
    if let Some(id) = branch_by_code(c, code).await? {
        return Ok(id);
    }
    let fields = BranchFields {
        code: Some(code.to_owned()),
        name: Some(name.to_owned()),
        city: Some(city.to_owned()),
        currency_code: Some("UGX".to_owned()),
        ..Default::default()
    };
    Ok(branches::insert(c, org, fields).await?.id)
}

/// Outcome of `create-admin`.
pub enum AdminOutcome {
    Created(Uuid),
    AlreadyExists(Uuid),
}

/// Creates an admin (and the organisation and head-office branch when there
/// are none). Idempotent for an existing email.
pub async fn create_admin(
    pool: &Pool,
    email: &str,
    password: &str,
    name: &str,
) -> Result<AdminOutcome> {
    passwords::validate_new(password)?;
    let mut client = pool.get().await?;
    if let Some(c) = users::credentials(&client, email).await? {
        return Ok(AdminOutcome::AlreadyExists(c.user.id));
    }
    let hash = passwords::hash_blocking(password.to_owned()).await?;
    let tx = client.transaction().await?;
    let org = ensure_organisation(&tx, "Pharmacy").await?;
    let any_branch = Query::select()
        .column("id")
        .from("branches")
        .and_where(Expr::col("is_deleted").eq(false))
        .limit(1)
        .to_owned();
    let branch = match db::fetch_opt(&tx, &any_branch).await? {
        Some(r) => branch_by_code(&tx, "HQ").await?.unwrap_or(r.get(0)),
        None => ensure_branch(&tx, org, "HQ", "Head Office", "").await?,
    };
    let user = users::insert(
        &tx,
        NewUser {
            org_id: org,
            branch_id: branch,
            email: email.trim().to_lowercase(),
            password_hash: hash,
            full_name: name.to_owned(),
            phone: String::new(),
            role: Role::Admin,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(AdminOutcome::Created(user.id))
}

/// A demo login: (email, role, branch code).
pub fn demo_logins() -> Vec<(String, Role, &'static str)> {
    DEMO_BRANCHES
        .iter()
        .flat_map(|(code, _, _)| {
            Role::ALL
                .into_iter()
                .map(move |role| (demo_email(role, code), role, *code))
        })
        .collect()
}

pub fn demo_email(role: Role, branch_code: &str) -> String {
    format!(
        "{}.{}@demo.pharmacy",
        role.as_str().replace('_', "-"),
        branch_code.to_lowercase()
    )
}

/// Seeds the demo chain. Returns false when it was already there.
pub async fn seed_demo(pool: &Pool) -> Result<bool> {
    let mut client = pool.get().await?;
    if users::credentials(&client, &demo_email(Role::Admin, "HQ"))
        .await?
        .is_some()
    {
        return Ok(false);
    }
    let hash = passwords::hash_blocking(DEMO_PASSWORD.to_owned()).await?;
    let tx = client.transaction().await?;
    let org = ensure_organisation(&tx, "Demo Pharmacy Chain").await?;
    for (code, name, city) in DEMO_BRANCHES {
        let branch = ensure_branch(&tx, org, code, name, city).await?;
        for role in Role::ALL {
            let email = demo_email(role, code);
            if users::credentials(&tx, &email).await?.is_some() {
                continue;
            }
            let title = role.as_str().replace('_', " ");
            users::insert(
                &tx,
                NewUser {
                    org_id: org,
                    branch_id: branch,
                    email,
                    password_hash: hash.clone(),
                    full_name: format!("Demo {title} ({code})"),
                    phone: String::new(),
                    role,
                },
            )
            .await?;
        }
    }
    tx.commit().await?;
    Ok(true)
}

/// Whether any user exists (first start of the dev service seeds the demo).
pub async fn has_users(pool: &Pool) -> Result<bool> {
    let client = pool.get().await?;
    let q = Query::select()
        .expr(Expr::cust("1"))
        .from("users")
        .limit(1)
        .to_owned();
    Ok(db::fetch_opt(&client, &q).await?.is_some())
}
