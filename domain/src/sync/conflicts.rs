//! Sync conflicts: a pushed `update` whose `base_rev` is behind the server's
//! row, and which would overwrite a field with a value the till never saw,
//! is not applied but recorded here with the server version, the client
//! version and the base. Head office resolves it with one of four
//! strategies; an applied resolution writes through the entity's normal
//! store path, so it gets its change-log row and audit like any write.

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, LockType, Order, Query};
use serde::Serialize;
use serde_json::{Map, Value as Json};
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::db::Pool;
use crate::{db, wire, Acting, Error, Result, Role};

use crate::audit;
use crate::paging::{self, Page};
use crate::sync::entities::{same, Entity};

const COLUMNS: [&str; 20] = [
    "id",
    "org_id",
    "entity_type",
    "entity_id",
    "branch_id",
    "device_id",
    "client_mutation_id",
    "base_rev",
    "server_rev",
    "server_version",
    "client_version",
    "base_version",
    "payload",
    "status",
    "strategy",
    "applied",
    "created_by",
    "created_at",
    "resolved_at",
    "resolved_by",
];

/// A conflict as listed: the spec's fields plus the base it was judged
/// against and, once resolved, how.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Conflict {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub entity_type: String,
    pub entity_id: String,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[schema(value_type = String)]
    pub org_id: Uuid,
    pub client_mutation_id: String,
    #[schema(value_type = String)]
    pub device_id: Uuid,
    /// The server row as it stood when the push arrived.
    #[schema(value_type = Object)]
    pub server_version: Json,
    /// The base with the till's fields applied: what the till wanted.
    #[schema(value_type = Object)]
    pub client_version: Json,
    /// The version the till last saw (`base_rev`), when the change log has it.
    #[schema(value_type = Option<Object>)]
    pub base_version: Option<Json>,
    pub base_rev: Option<i64>,
    pub server_rev: i64,
    /// The change's payload as pushed, keeping only the entity's fields
    /// (and `id`, `base_rev`, `updated_at`); other keys are dropped.
    #[schema(value_type = Object)]
    pub payload: Json,
    /// `pending` or `resolved`.
    pub status: String,
    pub strategy: Option<String>,
    pub applied: Option<bool>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub resolved_at: Option<DateTime<Utc>>,
    /// Id of the user who resolved it.
    pub resolved_by: Option<String>,
}

impl Conflict {
    fn from_row(r: &Row) -> Self {
        Conflict {
            id: r.get("id"),
            entity_type: r.get("entity_type"),
            entity_id: r.get("entity_id"),
            branch_id: r.get("branch_id"),
            org_id: r.get("org_id"),
            client_mutation_id: r.get("client_mutation_id"),
            device_id: r.get("device_id"),
            server_version: r.get("server_version"),
            client_version: r.get("client_version"),
            base_version: r.get("base_version"),
            base_rev: r.get("base_rev"),
            server_rev: r.get("server_rev"),
            payload: r.get("payload"),
            status: r.get("status"),
            strategy: r.get("strategy"),
            applied: r.get("applied"),
            created_at: r.get("created_at"),
            resolved_at: r.get("resolved_at"),
            resolved_by: r
                .get::<_, Option<Uuid>>("resolved_by")
                .map(|u| u.to_string()),
        }
    }
}

/// What a push found when it compared a stale update with the server row.
#[derive(Debug)]
pub struct NewConflict {
    pub entity: Entity,
    pub entity_id: Uuid,
    pub base_rev: i64,
    pub server_rev: i64,
    pub server_version: Json,
    pub client_version: Json,
    pub base_version: Option<Json>,
    pub payload: Json,
}

/// Who pushed the conflicting change.
pub struct Origin<'a> {
    pub org_id: Uuid,
    pub branch_id: Uuid,
    pub device_id: Uuid,
    pub user_id: Uuid,
    pub client_mutation_id: &'a str,
}

pub async fn insert<C: GenericClient + Sync>(
    tx: &C,
    origin: &Origin<'_>,
    c: NewConflict,
) -> Result<Uuid> {
    let id = Uuid::now_v7();
    let q = Query::insert()
        .into_table(Table::SyncConflicts)
        .columns([
            "id",
            "org_id",
            "entity_type",
            "entity_id",
            "branch_id",
            "device_id",
            "client_mutation_id",
            "base_rev",
            "server_rev",
            "server_version",
            "client_version",
            "base_version",
            "payload",
            "created_by",
        ])
        .values_panic([
            id.into(),
            origin.org_id.into(),
            c.entity.name().into(),
            c.entity_id.to_string().into(),
            origin.branch_id.into(),
            origin.device_id.into(),
            origin.client_mutation_id.into(),
            c.base_rev.into(),
            c.server_rev.into(),
            c.server_version.into(),
            c.client_version.into(),
            c.base_version.into(),
            c.payload.into(),
            origin.user_id.into(),
        ])
        .to_owned();
    db::execute(tx, &q).await?;
    Ok(id)
}

/// Pending conflicts of the organisation, newest first.
pub async fn pending<C: GenericClient + Sync>(
    c: &C,
    org_id: Uuid,
    page: Page,
) -> Result<(Vec<Conflict>, i64)> {
    let base = Query::select()
        .from(Table::SyncConflicts)
        .and_where(Expr::col("org_id").eq(org_id))
        .and_where(Expr::col("status").eq("pending"))
        .to_owned();
    let (rows, total) = paging::fetch(c, base, "id", page, |q| {
        q.columns(COLUMNS)
            .order_by("created_at", Order::Desc)
            .order_by("id", Order::Desc);
    })
    .await?;
    Ok((rows.iter().map(Conflict::from_row).collect(), total))
}

/// How head office settles a conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    LastWriteWins,
    Client,
    Server,
    Merge,
}

impl Strategy {
    /// Every strategy, in the order the document lists them.
    pub const ALL: [Strategy; 4] = [
        Strategy::LastWriteWins,
        Strategy::Client,
        Strategy::Server,
        Strategy::Merge,
    ];

    /// The strategy a resolution names; 400 naming `strategy` when it is
    /// missing or none of them.
    pub fn required(s: Option<&str>) -> Result<Strategy> {
        s.and_then(Strategy::parse).ok_or_else(|| {
            Error::validation(
                "strategy",
                format!(
                    "`strategy` must be one of {}.",
                    Strategy::ALL.map(Strategy::as_str).join(", ")
                ),
            )
        })
    }

    /// The strategy named exactly `s` (no trimming, no case folding).
    pub fn parse(s: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|st| st.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::LastWriteWins => "last_write_wins",
            Strategy::Client => "client",
            Strategy::Server => "server",
            Strategy::Merge => "merge",
        }
    }
}

/// The answer to a resolve: whether the client's fields were written, and
/// the entity's version that now stands.
#[derive(Debug, Serialize, ToSchema)]
pub struct Resolution {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub strategy: String,
    pub applied: bool,
    #[schema(value_type = Object)]
    pub payload: Json,
}

/// Resolves a pending conflict in one transaction: the conflict row is
/// locked first, so a second resolve waits and then finds it resolved (409).
pub async fn resolve<C: GenericClient + Sync>(
    tx: &C,
    org_id: Uuid,
    id: Uuid,
    strategy: Strategy,
    (actor, role): (Uuid, Role),
) -> Result<Resolution> {
    let conflict = lock(tx, org_id, id)
        .await?
        .ok_or_else(|| Error::not_found("Conflict not found"))?;
    if conflict.status != "pending" {
        return Err(Error::conflict(
            "This conflict is already resolved; a resolution is never overwritten.",
        ));
    }
    let entity = Entity::parse(&conflict.entity_type)
        .ok_or_else(|| Error::internal("conflict of an unknown entity"))?;
    let entity_id: Uuid = conflict.entity_id.parse().map_err(Error::internal)?;
    let current = entity.lock_current(tx, entity_id).await?;
    let fields = match strategy {
        Strategy::Server => None,
        Strategy::Client => Some(entity.changed_fields(&conflict.payload)),
        Strategy::LastWriteWins => client_is_later(&conflict, current.as_ref().map(|c| &c.0))
            .then(|| entity.changed_fields(&conflict.payload)),
        Strategy::Merge => Some(merge(entity, &conflict, current.as_ref().map(|c| &c.0))?),
    };
    let (applied, payload) = match (fields, current) {
        (Some(f), Some(_)) if !f.is_empty() => {
            (true, entity.update(tx, entity_id, f, (actor, role)).await?)
        }
        (Some(_), None) => {
            return Err(Error::conflict(format!(
                "The {} no longer exists; resolve with `server`.",
                entity.name()
            )))
        }
        (_, Some((now, _))) => (false, now),
        (None, None) => (false, conflict.server_version.clone()),
    };
    mark_resolved(tx, id, strategy, applied, actor).await?;
    audit::write_for(
        tx,
        Some(conflict.branch_id),
        audit::Entry {
            actor_id: Some(actor),
            action: "conflict_resolve",
            entity_type: "sync_conflict",
            entity_id: id.to_string(),
            before: Some(serde_json::json!({
                "status": "pending",
                "server_version": conflict.server_version,
                "client_version": conflict.client_version,
            })),
            after: Some(serde_json::json!({
                "status": "resolved",
                "strategy": strategy.as_str(),
                "applied": applied,
                "payload": payload,
            })),
        },
    )
    .await?;
    tracing::info!(conflict_id = %id, strategy = strategy.as_str(), applied, "conflict resolved");
    Ok(Resolution {
        id,
        strategy: strategy.as_str().to_owned(),
        applied,
        payload,
    })
}

async fn lock<C: GenericClient + Sync>(tx: &C, org_id: Uuid, id: Uuid) -> Result<Option<Conflict>> {
    let q = Query::select()
        .columns(COLUMNS)
        .from(Table::SyncConflicts)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("org_id").eq(org_id))
        .lock(LockType::Update)
        .to_owned();
    Ok(db::fetch_opt(tx, &q).await?.map(|r| Conflict::from_row(&r)))
}

async fn mark_resolved<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    strategy: Strategy,
    applied: bool,
    actor: Uuid,
) -> Result<()> {
    let q = Query::update()
        .table(Table::SyncConflicts)
        .values([
            ("status", "resolved".into()),
            ("strategy", strategy.as_str().into()),
            ("applied", applied.into()),
            ("resolved_at", Utc::now().into()),
            ("resolved_by", actor.into()),
        ])
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("status").eq("pending"))
        .to_owned();
    db::execute(tx, &q).await?;
    Ok(())
}

/// Last write wins: the till's change is dated by the `updated_at` it sent
/// (else by its arrival, when the conflict was recorded) and wins when it is
/// later than the server row's `updated_at`.
fn client_is_later(conflict: &Conflict, server_now: Option<&Json>) -> bool {
    let client_at = conflict
        .payload
        .get("updated_at")
        .and_then(Json::as_str)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or(conflict.created_at);
    let server_at = server_now
        .unwrap_or(&conflict.server_version)
        .get("updated_at")
        .and_then(Json::as_str)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc));
    server_at.is_none_or(|s| client_at > s)
}

/// Merge: the fields the till changed since the base, unless the server
/// changed one of them too (409 naming them). Without a known base every
/// field counts as changed by the server.
fn merge(
    entity: Entity,
    conflict: &Conflict,
    server_now: Option<&Json>,
) -> Result<Map<String, Json>> {
    let base = conflict.base_version.as_ref();
    let server = server_now.unwrap_or(&conflict.server_version);
    let differs = |version: &Json, f: &str| match base {
        Some(b) => !same(
            version.get(f).unwrap_or(&Json::Null),
            b.get(f).unwrap_or(&Json::Null),
        ),
        None => true,
    };
    let client: Map<String, Json> = entity
        .changed_fields(&conflict.payload)
        .into_iter()
        .filter(|(f, _)| differs(&conflict.client_version, f))
        .collect();
    let clashes: Vec<&str> = client
        .keys()
        .map(String::as_str)
        .filter(|f| differs(server, f))
        .collect();
    if !clashes.is_empty() {
        return Err(Error::conflict(format!(
            "Cannot merge: both the till and the server changed {}.",
            clashes.join(", ")
        )));
    }
    Ok(client)
}

/// Resolves conflict `id` with `strategy` for `acting` in a transaction of
/// its own (see [`resolve`]).
pub async fn resolve_one(
    pool: &Pool,
    acting: &Acting,
    id: Uuid,
    strategy: Strategy,
) -> Result<Resolution> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let resolution = resolve(
        &tx,
        acting.org_id,
        id,
        strategy,
        (acting.user_id, acting.role),
    )
    .await?;
    crate::db::commit(tx).await?;
    Ok(resolution)
}
