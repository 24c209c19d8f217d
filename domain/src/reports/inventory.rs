//! The inventory report: stock value by category and the low-stock list (no
//! window).

use chrono::NaiveDate;
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::Serialize;
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{first, Scope, LOW_STOCK_LIST};
use crate::{db, wire, Result};

#[derive(Debug, Serialize, ToSchema)]
pub struct CategoryValue {
    /// The category slug; `null` for medicines without one.
    pub category: Option<String>,
    /// The category's name (`Uncategorised` without one).
    pub name: String,
    pub medicine_count: i64,
    pub units: i64,
    /// Σ stock × selling price.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub value: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LowStockItem {
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub name: String,
    pub category: Option<String>,
    pub stock_quantity: i64,
    pub low_stock_threshold: i32,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InventoryReport {
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    /// Active, not deleted medicines.
    pub total_medicines: i64,
    /// Medicines with 0 < stock <= their threshold.
    pub low_stock_count: i64,
    /// Medicines with no stock (not counted as low).
    pub out_of_stock_count: i64,
    pub total_units: i64,
    /// Σ stock × selling price.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub total_value: Decimal,
    /// Per category, highest value first (ties by name).
    pub by_category: Vec<CategoryValue>,
    /// The 20 emptiest medicines at or below their threshold (out-of-stock
    /// ones included), emptiest first, ties by name.
    pub low_stock_list: Vec<LowStockItem>,
    /// Stock now in batches past their expiry date, at cost (each batch's
    /// units at their share of what it cost, to the cent), whatever their
    /// regulator status.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub expired_value: Decimal,
    /// Stock written off in the report window, at cost.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub written_off_value: Decimal,
    /// The window `written_off_value` covers.
    #[schema(value_type = String, format = Date)]
    pub from_date: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub to_date: NaiveDate,
}

pub async fn inventory<C: GenericClient + Sync>(c: &C, s: &Scope<'_>) -> Result<InventoryReport> {
    let branch = s.branch;
    let rows = category_rows(c, branch).await?;
    let (expired_value, written_off_value) = losses(c, s).await?;
    let mut report = InventoryReport {
        branch_id: branch,
        total_medicines: 0,
        low_stock_count: 0,
        out_of_stock_count: 0,
        total_units: 0,
        total_value: Decimal::ZERO,
        by_category: Vec::new(),
        low_stock_list: low_stock(c, branch).await?,
        expired_value,
        written_off_value,
        from_date: s.window.from,
        to_date: s.window.to,
    };
    for r in &rows {
        // GROUPING SETS: the `()` set is the catalogue-wide total.
        if r.get::<_, i32>(0) == 1 {
            report.total_medicines = r.get(3);
            report.total_units = r.get(4);
            report.total_value = r.get(5);
            report.low_stock_count = r.get(6);
            report.out_of_stock_count = r.get(7);
            continue;
        }
        report.by_category.push(CategoryValue {
            category: r.get(1),
            name: r.get(2),
            medicine_count: r.get(3),
            units: r.get(4),
            value: r.get(5),
        });
    }
    Ok(report)
}

/// Per category and (grouping 1) in total: medicines, units, value, low and
/// out-of-stock counts. With a branch, stock is that branch's ledger sum
/// (stock_movements); for the chain, the batches' `qty_remaining`, which
/// equals the ledger by the stock invariant and reads fewer rows.
pub(super) async fn category_rows<C: GenericClient + Sync>(
    c: &C,
    branch: Option<Uuid>,
) -> Result<Vec<Row>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH st AS (
               SELECT medicine_id, sum(qty)::bigint AS qty FROM stock_movements
               WHERE branch_id = {branch} GROUP BY medicine_id
               UNION ALL
               SELECT medicine_id, sum(qty_remaining)::bigint FROM batches
               WHERE {branch}::uuid IS NULL AND qty_remaining > 0 AND NOT is_deleted
               GROUP BY medicine_id),
           m AS (
               SELECT m.category, m.selling_price, m.low_stock_threshold, coalesce(st.qty, 0) AS qty
               FROM medicines m LEFT JOIN st ON st.medicine_id = m.id
               WHERE m.is_active AND NOT m.is_deleted)
           SELECT grouping(m.category), m.category, coalesce(max(c.name), 'Uncategorised'),
                  count(*)::bigint, coalesce(sum(m.qty), 0)::bigint,
                  coalesce(sum(m.qty * m.selling_price), 0),
                  count(*) FILTER (WHERE m.qty > 0 AND m.qty <= m.low_stock_threshold),
                  count(*) FILTER (WHERE m.qty <= 0)
           FROM m LEFT JOIN categories c ON c.slug = m.category
           GROUP BY GROUPING SETS ((m.category), ())
           ORDER BY 1 DESC, 6 DESC, 3, 2"#
    );
    db::raw_all(c, &q.sql, q.values).await
}

pub(super) async fn low_stock<C: GenericClient + Sync>(
    c: &C,
    branch: Option<Uuid>,
) -> Result<Vec<LowStockItem>> {
    let limit = LOW_STOCK_LIST;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH st AS (
               SELECT medicine_id, sum(qty)::bigint AS qty FROM stock_movements
               WHERE branch_id = {branch} GROUP BY medicine_id
               UNION ALL
               SELECT medicine_id, sum(qty_remaining)::bigint FROM batches
               WHERE {branch}::uuid IS NULL AND qty_remaining > 0 AND NOT is_deleted
               GROUP BY medicine_id)
           SELECT m.id, m.name, m.category, coalesce(st.qty, 0), m.low_stock_threshold
           FROM medicines m LEFT JOIN st ON st.medicine_id = m.id
           WHERE m.is_active AND NOT m.is_deleted AND coalesce(st.qty, 0) <= m.low_stock_threshold
           ORDER BY 4, m.name, m.id
           LIMIT {limit}"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| LowStockItem {
            medicine_id: r.get(0),
            name: r.get(1),
            category: r.get(2),
            stock_quantity: r.get(3),
            low_stock_threshold: r.get(4),
        })
        .collect())
}

/// (value at cost of the expired stock now, value written off in the window).
pub(super) async fn losses<C: GenericClient + Sync>(
    c: &C,
    s: &Scope<'_>,
) -> Result<(Decimal, Decimal)> {
    let (start, end, branch) = (s.window.start, s.window.end, s.branch);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT (SELECT coalesce(sum(batch_value(qty_remaining, unit_cost, received_total,
                                                     qty_received)), 0)
                   FROM batches
                   WHERE qty_remaining > 0 AND NOT is_deleted AND expiry_date < org_today()
                     AND ({branch}::uuid IS NULL OR branch_id = {branch})),
                  (SELECT coalesce(sum(total_value), 0) FROM write_offs
                   WHERE created_at >= {start} AND created_at < {end}
                     AND ({branch}::uuid IS NULL OR branch_id = {branch}))"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let r = first(&rows)?;
    Ok((r.get(0), r.get(1)))
}
