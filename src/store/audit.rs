//! The audit log: who changed what, when, with the before and after values.

use deadpool_postgres::GenericClient;
use sea_query::Query;
use serde_json::Value as Json;
use uuid::Uuid;

use actors::{db, Result};

pub struct Entry<'a> {
    pub actor_id: Option<Uuid>,
    pub action: &'a str,
    pub entity_type: &'a str,
    pub entity_id: String,
    pub before: Option<Json>,
    pub after: Option<Json>,
}

pub async fn write<C: GenericClient + Sync>(tx: &C, e: Entry<'_>) -> Result<()> {
    let q = Query::insert()
        .into_table("audit_log")
        .columns([
            "id",
            "actor_id",
            "action",
            "entity_type",
            "entity_id",
            "before",
            "after",
        ])
        .values_panic([
            Uuid::now_v7().into(),
            e.actor_id.into(),
            e.action.into(),
            e.entity_type.into(),
            e.entity_id.into(),
            e.before.into(),
            e.after.into(),
        ])
        .to_owned();
    db::execute(tx, &q).await?;
    Ok(())
}
