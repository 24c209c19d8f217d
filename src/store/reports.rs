//! Reports: sales, sales by pharmacist, inventory, purchases and VAT. Every
//! figure is aggregated by PostgreSQL (GROUP BY, day and month buckets in the
//! organisation's time zone); Rust only shapes the rows. Money is summed as
//! `numeric` and carried as `Decimal`.

use chrono::{DateTime, Datelike, NaiveDate, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::{Decimal, RoundingStrategy};
use serde::Serialize;
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use actors::window::ReportWindow;
use actors::{db, wire, Result};

/// The default report window: the last 30 days up to today (Limits).
pub const DEFAULT_WINDOW_DAYS: i64 = 30;
/// Rows in the lists the spec caps (Limits).
pub const TOP_SELLING: i64 = 10;
pub const RECENT_SALES: i64 = 8;
pub const LOW_STOCK_LIST: i64 = 20;
pub const TOP_PURCHASED: i64 = 20;

/// A decimal (a percentage) as a JSON number.
pub fn decimal_num<S: serde::Serializer>(
    d: &Decimal,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.to_f64().unwrap_or_default())
}

/// `100 × part / whole`, one decimal (half away from zero); 0 when `whole` is 0.
pub fn ratio_pct(part: Decimal, whole: Decimal) -> Decimal {
    if whole.is_zero() {
        return Decimal::ZERO;
    }
    (Decimal::ONE_HUNDRED * part / whole)
        .round_dp_with_strategy(1, RoundingStrategy::MidpointAwayFromZero)
}

/// What a report covers: the days, and one branch or (`None`) all of them.
pub struct Scope<'a> {
    pub window: &'a ReportWindow,
    pub branch: Option<Uuid>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SalesTotals {
    /// Number of sales.
    pub count: i64,
    /// Σ sale totals (VAT included, discounts taken off).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub revenue: Decimal,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub vat: Decimal,
    /// Revenue net of VAT.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub subtotal: Decimal,
    /// Revenue per sale; 0 without sales.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub average: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DayTotal {
    #[schema(value_type = String, format = Date)]
    pub date: NaiveDate,
    pub count: i64,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub total: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PaymentTotal {
    pub payment_method: String,
    pub count: i64,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub total: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TopMedicine {
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub name: String,
    pub quantity: i64,
    /// Σ line totals (VAT included).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub revenue: Decimal,
    /// Σ quantity × cost_at_sale.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub cost: Decimal,
    /// revenue − cost.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub gross_profit: Decimal,
    /// gross_profit / revenue in percent, one decimal; 0 for zero revenue.
    #[serde(serialize_with = "decimal_num")]
    #[schema(value_type = f64)]
    pub margin_pct: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RecentSale {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub invoice_number: String,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub payment_method: String,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub total: Decimal,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    /// The user who made the sale.
    #[schema(value_type = String)]
    pub pharmacist_id: Uuid,
    pub pharmacist_name: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SalesReport {
    #[schema(value_type = String, format = Date)]
    pub from_date: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub to_date: NaiveDate,
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    pub totals: SalesTotals,
    /// Every day of the window, oldest first (days without sales carry zeros).
    pub by_day: Vec<DayTotal>,
    /// Per payment method, highest total first.
    pub by_payment: Vec<PaymentTotal>,
    /// Top 10 medicines by revenue.
    pub top_selling: Vec<TopMedicine>,
    /// The 8 most recent sales of the window, newest first.
    pub recent_sales: Vec<RecentSale>,
}

pub async fn sales<C: GenericClient + Sync>(c: &C, s: &Scope<'_>) -> Result<SalesReport> {
    Ok(SalesReport {
        from_date: s.window.from,
        to_date: s.window.to,
        branch_id: s.branch,
        totals: sales_totals(c, s).await?,
        by_day: by_day(c, s).await?,
        by_payment: by_payment(c, s).await?,
        top_selling: top_selling(c, s).await?,
        recent_sales: recent_sales(c, s).await?,
    })
}

async fn sales_totals<C: GenericClient + Sync>(c: &C, s: &Scope<'_>) -> Result<SalesTotals> {
    let (start, end, branch) = (s.window.start, s.window.end, s.branch);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT count(*)::bigint, coalesce(sum(total), 0), coalesce(sum(vat), 0),
                  coalesce(sum(subtotal), 0), coalesce(round(sum(total) / nullif(count(*), 0), 2), 0)
           FROM sales
           WHERE created_at >= {start} AND created_at < {end}
             AND ({branch}::uuid IS NULL OR branch_id = {branch})"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let r = first(&rows)?;
    Ok(SalesTotals {
        count: r.get(0),
        revenue: r.get(1),
        vat: r.get(2),
        subtotal: r.get(3),
        average: r.get(4),
    })
}

/// Every day of the window, zero-filled by `generate_series`.
async fn by_day<C: GenericClient + Sync>(c: &C, s: &Scope<'_>) -> Result<Vec<DayTotal>> {
    let w = s.window;
    let (from, to, start, end, tz, branch) = (w.from, w.to, w.start, w.end, w.tz.clone(), s.branch);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT d::date, coalesce(x.n, 0)::bigint, coalesce(x.total, 0::numeric)
           FROM generate_series({from}::date, {to}::date, interval '1 day') d
           LEFT JOIN (SELECT (created_at AT TIME ZONE {tz})::date AS day, count(*) AS n, sum(total) AS total
                      FROM sales
                      WHERE created_at >= {start} AND created_at < {end}
                        AND ({branch}::uuid IS NULL OR branch_id = {branch})
                      GROUP BY 1) x ON x.day = d::date
           ORDER BY 1"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| DayTotal {
            date: r.get(0),
            count: r.get(1),
            total: r.get(2),
        })
        .collect())
}

async fn by_payment<C: GenericClient + Sync>(c: &C, s: &Scope<'_>) -> Result<Vec<PaymentTotal>> {
    let (start, end, branch) = (s.window.start, s.window.end, s.branch);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT payment_method, count(*)::bigint, sum(total)
           FROM sales
           WHERE created_at >= {start} AND created_at < {end}
             AND ({branch}::uuid IS NULL OR branch_id = {branch})
           GROUP BY payment_method
           ORDER BY 3 DESC, 1"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| PaymentTotal {
            payment_method: r.get(0),
            count: r.get(1),
            total: r.get(2),
        })
        .collect())
}

/// Lines (which carry their sale's time and branch) are aggregated per
/// medicine first; only the top ten meet the catalogue.
async fn top_selling<C: GenericClient + Sync>(c: &C, s: &Scope<'_>) -> Result<Vec<TopMedicine>> {
    let (start, end, branch, limit) = (s.window.start, s.window.end, s.branch, TOP_SELLING);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT x.medicine_id, m.name, x.quantity, x.revenue, x.cost, x.revenue - x.cost,
                  CASE WHEN x.revenue = 0 THEN 0
                       ELSE round(100 * (x.revenue - x.cost) / x.revenue, 1) END
           FROM (SELECT medicine_id, sum(quantity)::bigint AS quantity,
                        sum(line_total) AS revenue, sum(quantity * cost_at_sale) AS cost
                 FROM sale_items
                 WHERE sold_at >= {start} AND sold_at < {end}
                   AND ({branch}::uuid IS NULL OR branch_id = {branch})
                 GROUP BY medicine_id) x
           JOIN medicines m ON m.id = x.medicine_id
           ORDER BY x.revenue DESC, m.name, x.medicine_id
           LIMIT {limit}"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| TopMedicine {
            medicine_id: r.get(0),
            name: r.get(1),
            quantity: r.get(2),
            revenue: r.get(3),
            cost: r.get(4),
            gross_profit: r.get(5),
            margin_pct: r.get(6),
        })
        .collect())
}

async fn recent_sales<C: GenericClient + Sync>(c: &C, s: &Scope<'_>) -> Result<Vec<RecentSale>> {
    let (start, end, branch, limit) = (s.window.start, s.window.end, s.branch, RECENT_SALES);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT s.id, s.invoice_number, s.branch_id, s.payment_method, s.total, s.created_at,
                  s.created_by, coalesce(u.full_name, '')
           FROM sales s LEFT JOIN users u ON u.id = s.created_by
           WHERE s.created_at >= {start} AND s.created_at < {end}
             AND ({branch}::uuid IS NULL OR s.branch_id = {branch})
           ORDER BY s.created_at DESC, s.id DESC
           LIMIT {limit}"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| RecentSale {
            id: r.get(0),
            invoice_number: r.get(1),
            branch_id: r.get(2),
            payment_method: r.get(3),
            total: r.get(4),
            created_at: r.get(5),
            pharmacist_id: r.get(6),
            pharmacist_name: r.get(7),
        })
        .collect())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PharmacistSales {
    #[schema(value_type = String)]
    pub user_id: Uuid,
    pub name: String,
    pub role: String,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub branch_name: String,
    /// Number of sales (transactions).
    pub count: i64,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub revenue: Decimal,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub vat: Decimal,
    /// Average transaction value: revenue / count.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub average: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PharmacistReport {
    #[schema(value_type = String, format = Date)]
    pub from_date: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub to_date: NaiveDate,
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    /// One row per user and branch, revenue descending (ties by name).
    pub items: Vec<PharmacistSales>,
}

pub async fn by_pharmacist<C: GenericClient + Sync>(
    c: &C,
    s: &Scope<'_>,
) -> Result<PharmacistReport> {
    let (start, end, branch) = (s.window.start, s.window.end, s.branch);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT x.created_by, coalesce(u.full_name, ''), coalesce(u.role, ''), x.branch_id, b.name,
                  x.n, x.revenue, x.vat, round(x.revenue / x.n, 2)
           FROM (SELECT created_by, branch_id, count(*)::bigint AS n, sum(total) AS revenue, sum(vat) AS vat
                 FROM sales
                 WHERE created_at >= {start} AND created_at < {end}
                   AND ({branch}::uuid IS NULL OR branch_id = {branch})
                 GROUP BY created_by, branch_id) x
           JOIN branches b ON b.id = x.branch_id
           LEFT JOIN users u ON u.id = x.created_by
           ORDER BY x.revenue DESC, 2, b.name, x.created_by"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let items = rows
        .iter()
        .map(|r| PharmacistSales {
            user_id: r.get(0),
            name: r.get(1),
            role: r.get(2),
            branch_id: r.get(3),
            branch_name: r.get(4),
            count: r.get(5),
            revenue: r.get(6),
            vat: r.get(7),
            average: r.get(8),
        })
        .collect();
    Ok(PharmacistReport {
        from_date: s.window.from,
        to_date: s.window.to,
        branch_id: s.branch,
        items,
    })
}

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
}

pub async fn inventory<C: GenericClient + Sync>(
    c: &C,
    branch: Option<Uuid>,
) -> Result<InventoryReport> {
    let rows = category_rows(c, branch).await?;
    let mut report = InventoryReport {
        branch_id: branch,
        total_medicines: 0,
        low_stock_count: 0,
        out_of_stock_count: 0,
        total_units: 0,
        total_value: Decimal::ZERO,
        by_category: Vec::new(),
        low_stock_list: low_stock(c, branch).await?,
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
async fn category_rows<C: GenericClient + Sync>(c: &C, branch: Option<Uuid>) -> Result<Vec<Row>> {
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

async fn low_stock<C: GenericClient + Sync>(
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

#[derive(Debug, Serialize, ToSchema)]
pub struct PurchaseTotals {
    pub batch_count: i64,
    pub units: i64,
    /// Σ qty_received × unit_cost.
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
                  coalesce(sum(b.qty_received), 0)::bigint, coalesce(sum(b.qty_received * b.unit_cost), 0)
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

async fn purchases_by_medicine<C: GenericClient + Sync>(
    c: &C,
    s: &Scope<'_>,
) -> Result<Vec<MedicineSpend>> {
    let (start, end, branch, limit) = (s.window.start, s.window.end, s.branch, TOP_PURCHASED);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT x.medicine_id, m.name, x.n, x.units, x.spend
           FROM (SELECT medicine_id, count(*)::bigint AS n, sum(qty_received)::bigint AS units,
                        sum(qty_received * unit_cost) AS spend
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

/// One month (or the window's total) of the VAT report. Taxable amounts are
/// net of VAT (line total − line VAT).
#[derive(Debug, Serialize, ToSchema)]
pub struct VatFigures {
    /// Lines sold at 0 % (zero-rated and exempt medicines, or standard-rated
    /// ones while tax was off).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub taxable_0: Decimal,
    /// Lines that carried VAT, whatever the configured standard rate.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub taxable_18: Decimal,
    /// Compatibility alias of `taxable_18` (same value).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub taxable_15: Decimal,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub vat_collected: Decimal,
    /// taxable_0 + taxable_18 + vat_collected (what customers paid).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub grand_total: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VatMonth {
    /// `YYYY-MM` in the organisation's time zone.
    pub month: String,
    #[serde(flatten)]
    pub figures: VatFigures,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VatReport {
    #[schema(value_type = String, format = Date)]
    pub from_date: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub to_date: NaiveDate,
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    /// Months with sales in the window, newest first.
    pub by_month: Vec<VatMonth>,
    pub totals: VatFigures,
}

/// Each month of the window is one range of the lines' time index, summed
/// on its own (no per-line month bucketing, no sort); the `()` grouping set
/// adds the months up.
pub async fn vat<C: GenericClient + Sync>(c: &C, s: &Scope<'_>) -> Result<VatReport> {
    let w = s.window;
    let (from, start, end, tz, branch) = (w.from, w.start, w.end, w.tz.clone(), s.branch);
    // An integer series of known length keeps the planner's row estimate
    // (and so its cost, and JIT) honest.
    let months =
        (w.to.year() * 12 + w.to.month() as i32) - (from.year() * 12 + from.month() as i32) + 1;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT grouping(k.month), k.month,
                  coalesce(sum(a.taxable_0), 0), coalesce(sum(a.taxable_18), 0),
                  coalesce(sum(a.vat), 0), coalesce(sum(a.grand), 0)
           FROM (SELECT to_char(m, 'YYYY-MM') AS month,
                        greatest({start}::timestamptz, m AT TIME ZONE {tz}) AS lo,
                        least({end}::timestamptz, (m + interval '1 month') AT TIME ZONE {tz}) AS hi
                 FROM (SELECT date_trunc('month', {from}::date::timestamp) + make_interval(months => i) AS m
                       FROM generate_series(0, {months}::int - 1) i) ms) k
           CROSS JOIN LATERAL (
                 SELECT sum(line_total - vat_amount) FILTER (WHERE vat_rate = 0) AS taxable_0,
                        sum(line_total - vat_amount) FILTER (WHERE vat_rate > 0) AS taxable_18,
                        sum(vat_amount) AS vat, sum(line_total) AS grand, count(*) AS lines
                 FROM sale_items
                 WHERE sold_at >= k.lo AND sold_at < k.hi
                   AND ({branch}::uuid IS NULL OR branch_id = {branch})) a
           WHERE a.lines > 0
           GROUP BY GROUPING SETS ((k.month), ())
           ORDER BY 1 DESC, 2 DESC"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let figures = |r: &Row| {
        let taxable_18: Decimal = r.get(3);
        VatFigures {
            taxable_0: r.get(2),
            taxable_18,
            taxable_15: taxable_18,
            vat_collected: r.get(4),
            grand_total: r.get(5),
        }
    };
    let mut report = VatReport {
        from_date: w.from,
        to_date: w.to,
        branch_id: s.branch,
        by_month: Vec::new(),
        totals: figures(first(&rows)?),
    };
    for r in rows.iter().filter(|r| r.get::<_, i32>(0) == 0) {
        report.by_month.push(VatMonth {
            month: r.get(1),
            figures: figures(r),
        });
    }
    Ok(report)
}

fn first(rows: &[Row]) -> Result<&Row> {
    rows.first()
        .ok_or_else(|| actors::Error::internal("aggregate query returned no row"))
}
