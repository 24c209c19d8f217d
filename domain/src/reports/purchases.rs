//! The purchases report: spend by supplier and by medicine over what was
//! received in the window. A receipt is a line of a posted goods received
//! note (counted when the note was posted, at its landed cost: the goods
//! and their share of the note's charges, which the report also shows
//! apart), or a purchased batch without a note (loaded before notes
//! existed, or by a bulk loader), counted when it was created at what it
//! cost as received (`received_total`).

use chrono::NaiveDate;
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{Scope, TOP_PURCHASED};
use crate::{db, wire, Result};

#[derive(Debug, Serialize, ToSchema)]
pub struct PurchaseTotals {
    pub batch_count: i64,
    pub units: i64,
    /// Σ what the receipts cost landed (goods and charges).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub spend: Decimal,
    /// The part of `spend` that was charges (freight, insurance, ...).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub charges: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SupplierSpend {
    /// `null` for batches received without a supplier.
    #[schema(value_type = Option<String>)]
    pub supplier_id: Option<Uuid>,
    pub supplier_name: Option<String>,
    pub batch_count: i64,
    pub units: i64,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub spend: Decimal,
    /// The part of `spend` that was charges.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub charges: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MedicineSpend {
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub name: String,
    pub batch_count: i64,
    pub units: i64,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub spend: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PurchasesReport {
    #[schema(value_type = String, format = Date)]
    pub from_date: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub to_date: NaiveDate,
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    pub totals: PurchaseTotals,
    /// Highest spend first (ties by name).
    pub by_supplier: Vec<SupplierSpend>,
    /// Top 20 medicines by spend.
    pub by_medicine: Vec<MedicineSpend>,
}

/// Batches received as purchases in the window (transfer-in batches are
/// the same stock moving, so they are left out).
pub async fn purchases<C: GenericClient + Sync>(c: &C, s: &Scope<'_>) -> Result<PurchasesReport> {
    let (start, end, branch) = (s.window.start, s.window.end, s.branch);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH receipts AS (
             SELECT n.supplier_id, l.quantity_received AS units, l.landed_total AS spend,
                    l.charge_share AS charges
               FROM goods_received_notes n
               JOIN goods_received_lines l ON l.note_id = n.id
               JOIN batches b ON b.id = l.batch_id AND NOT b.is_deleted
              WHERE n.status = 'posted' AND n.posted_at >= {start} AND n.posted_at < {end}
                AND ({branch}::uuid IS NULL OR n.branch_id = {branch})
             UNION ALL
             SELECT b.supplier_id, b.qty_received,
                    coalesce(b.received_total, b.qty_received * b.unit_cost), 0
               FROM batches b
              WHERE b.origin = 'purchase' AND NOT b.is_deleted
                AND b.created_at >= {start} AND b.created_at < {end}
                AND ({branch}::uuid IS NULL OR b.branch_id = {branch})
                AND NOT EXISTS (SELECT 1 FROM goods_received_lines l WHERE l.batch_id = b.id))
           SELECT grouping(r.supplier_id), r.supplier_id, max(sp.name), count(*)::bigint,
                  coalesce(sum(r.units), 0)::bigint, coalesce(sum(r.spend), 0),
                  coalesce(sum(r.charges), 0)
           FROM receipts r LEFT JOIN suppliers sp ON sp.id = r.supplier_id
           GROUP BY GROUPING SETS ((r.supplier_id), ())
           ORDER BY 1 DESC, 6 DESC, 3, 2"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let mut totals = PurchaseTotals {
        batch_count: 0,
        units: 0,
        spend: Decimal::ZERO,
        charges: Decimal::ZERO,
    };
    let mut by_supplier = Vec::new();
    for r in &rows {
        if r.get::<_, i32>(0) == 1 {
            totals = PurchaseTotals {
                batch_count: r.get(3),
                units: r.get(4),
                spend: r.get(5),
                charges: r.get(6),
            };
            continue;
        }
        by_supplier.push(SupplierSpend {
            supplier_id: r.get(1),
            supplier_name: r.get(2),
            batch_count: r.get(3),
            units: r.get(4),
            spend: r.get(5),
            charges: r.get(6),
        });
    }
    Ok(PurchasesReport {
        from_date: s.window.from,
        to_date: s.window.to,
        branch_id: s.branch,
        totals,
        by_supplier,
        by_medicine: purchases_by_medicine(c, s).await?,
    })
}

pub(super) async fn purchases_by_medicine<C: GenericClient + Sync>(
    c: &C,
    s: &Scope<'_>,
) -> Result<Vec<MedicineSpend>> {
    let (start, end, branch, limit) = (s.window.start, s.window.end, s.branch, TOP_PURCHASED);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT x.medicine_id, m.name, x.n, x.units, x.spend
           FROM (SELECT medicine_id, count(*)::bigint AS n, sum(units)::bigint AS units,
                        sum(spend) AS spend
                 FROM (SELECT l.medicine_id, l.quantity_received AS units,
                              l.landed_total AS spend
                         FROM goods_received_notes n
                         JOIN goods_received_lines l ON l.note_id = n.id
                         JOIN batches b ON b.id = l.batch_id AND NOT b.is_deleted
                        WHERE n.status = 'posted' AND n.posted_at >= {start}
                          AND n.posted_at < {end}
                          AND ({branch}::uuid IS NULL OR n.branch_id = {branch})
                       UNION ALL
                       SELECT b.medicine_id, b.qty_received,
                              coalesce(b.received_total, b.qty_received * b.unit_cost)
                         FROM batches b
                        WHERE b.origin = 'purchase' AND NOT b.is_deleted
                          AND b.created_at >= {start} AND b.created_at < {end}
                          AND ({branch}::uuid IS NULL OR b.branch_id = {branch})
                          AND NOT EXISTS (SELECT 1 FROM goods_received_lines l
                                           WHERE l.batch_id = b.id)) receipts
                 GROUP BY medicine_id) x
           JOIN medicines m ON m.id = x.medicine_id
           ORDER BY x.spend DESC, m.name, x.medicine_id
           LIMIT {limit}"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| MedicineSpend {
            medicine_id: r.get(0),
            name: r.get(1),
            batch_count: r.get(2),
            units: r.get(3),
            spend: r.get(4),
        })
        .collect())
}
