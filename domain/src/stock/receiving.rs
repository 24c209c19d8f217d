//! Receiving a purchased batch: the batch and its IN movement in one
//! transaction, through the branch's actor.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use uuid::Uuid;

use crate::db::Pool;
use crate::error::{Error, Result};
use crate::stock::{self, Batch, Kind, NewBatch};
use crate::wire;
use actors::runtime::Command;

/// The spec's 201 answer of `POST /purchases`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ReceivedBatch {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[schema(value_type = Option<String>)]
    pub supplier_id: Option<Uuid>,
    pub batch_number: String,
    #[schema(value_type = String, format = Date)]
    pub expiry_date: chrono::NaiveDate,
    #[schema(value_type = Option<String>, format = Date)]
    pub manufacturing_date: Option<chrono::NaiveDate>,
    pub qty_received: i32,
    pub qty_remaining: i32,
    /// Cost per base unit: 2 decimals, or 4 where it has them.
    #[serde(serialize_with = "wire::cost_str")]
    #[schema(value_type = String, example = "1200.00")]
    pub unit_cost: Decimal,
    pub status: String,
    pub regulator_status: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    pub medicine_name: String,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub medicine_selling_price: Decimal,
    pub supplier_name: String,
    pub is_deleted: bool,
    pub rev: i64,
}

/// A validated purchase to receive.
pub struct ReceivePurchase {
    pub batch: NewBatch,
}

impl Command for ReceivePurchase {
    type Error = crate::Error;
    type Output = ReceivedBatch;
    const NAME: &'static str = "receive_purchase";

    async fn run(self, pool: Pool) -> Result<ReceivedBatch> {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        let b = self.batch;
        let (medicine_id, supplier_id, branch_id) = (b.medicine_id, b.supplier_id, b.branch_id);
        let q = sea_query::raw_query!(
            PostgresQueryBuilder,
            r#"SELECT m.name, m.selling_price,
                      (SELECT s.name FROM suppliers s
                        WHERE s.id = {supplier_id} AND NOT s.is_deleted) AS supplier_name,
                      EXISTS (SELECT 1 FROM branches br
                        WHERE br.id = {branch_id} AND NOT br.is_deleted) AS branch_ok
               FROM medicines m WHERE m.id = {medicine_id} AND NOT m.is_deleted"#
        );
        let row = crate::db::raw_opt(&tx, &q.sql, q.values)
            .await?
            .ok_or_else(|| Error::validation("medicine_id", "`medicine_id` names no medicine."))?;
        let supplier_name: Option<String> = row.get("supplier_name");
        let supplier_name = supplier_name
            .ok_or_else(|| Error::validation("supplier_id", "`supplier_id` names no supplier."))?;
        if !row.get::<_, bool>("branch_ok") {
            return Err(Error::validation(
                "branch_id",
                "`branch_id` names no branch.",
            ));
        }
        let batch: Batch = stock::receive(&tx, b, Kind::In, None).await?;
        tx.commit().await?;
        Ok(ReceivedBatch {
            id: batch.id,
            medicine_id: batch.medicine_id,
            branch_id: batch.branch_id,
            supplier_id: batch.supplier_id,
            batch_number: batch.batch_number,
            expiry_date: batch.expiry_date,
            manufacturing_date: batch.manufacturing_date,
            qty_received: batch.qty_received,
            qty_remaining: batch.qty_remaining,
            unit_cost: batch.unit_cost,
            status: batch.status,
            regulator_status: batch.regulator_status,
            created_at: batch.created_at,
            medicine_name: row.get("name"),
            medicine_selling_price: row.get("selling_price"),
            supplier_name,
            is_deleted: batch.is_deleted,
            rev: batch.rev,
        })
    }
}
