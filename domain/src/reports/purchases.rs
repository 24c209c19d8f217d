//! The purchases report: spend by supplier and by medicine over batches
//! received in the window. Spend is what each batch cost as received, to
//! the cent (`received_total`), not units × the 4-place unit cost.

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
    /// Σ what the batches cost as received (`received_total`; for batches
    /// from before receiving by pack, qty_received × unit_cost).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub spend: Decimal,
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
        r#"SELECT grouping(b.supplier_id), b.supplier_id, max(sp.name), count(*)::bigint,
                  coalesce(sum(b.qty_received), 0)::bigint,
                  coalesce(sum(coalesce(b.received_total, b.qty_received * b.unit_cost)), 0)
           FROM batches b LEFT JOIN suppliers sp ON sp.id = b.supplier_id
           WHERE b.origin = 'purchase' AND NOT b.is_deleted
             AND b.created_at >= {start} AND b.created_at < {end}
             AND ({branch}::uuid IS NULL OR b.branch_id = {branch})
           GROUP BY GROUPING SETS ((b.supplier_id), ())
           ORDER BY 1 DESC, 6 DESC, 3, 2"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let mut totals = PurchaseTotals {
        batch_count: 0,
        units: 0,
        spend: Decimal::ZERO,
    };
    let mut by_supplier = Vec::new();
    for r in &rows {
        if r.get::<_, i32>(0) == 1 {
            totals = PurchaseTotals {
                batch_count: r.get(3),
                units: r.get(4),
                spend: r.get(5),
            };
            continue;
        }
        by_supplier.push(SupplierSpend {
            supplier_id: r.get(1),
            supplier_name: r.get(2),
            batch_count: r.get(3),
            units: r.get(4),
            spend: r.get(5),
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
           FROM (SELECT medicine_id, count(*)::bigint AS n, sum(qty_received)::bigint AS units,
                        sum(coalesce(received_total, qty_received * unit_cost)) AS spend
                 FROM batches
                 WHERE origin = 'purchase' AND NOT is_deleted
                   AND created_at >= {start} AND created_at < {end}
                   AND ({branch}::uuid IS NULL OR branch_id = {branch})
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
