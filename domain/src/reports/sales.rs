//! The sales report: totals, by day, by payment method, the top sellers and
//! the most recent sales.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{decimal_num, ratio_pct, Scope, RECENT_SALES, TOP_SELLING};
use crate::{db, wire, Result};

#[derive(Debug, Serialize, ToSchema)]
pub struct SalesTotals {
    /// Number of sales.
    pub count: i64,
    /// Σ sale totals (VAT included, discounts taken off) less the credit
    /// notes issued in the window.
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
    /// Credit notes issued in the window (already taken off revenue, VAT
    /// and subtotal).
    pub returns_count: i64,
    /// What those credit notes refunded (VAT included).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub returns_total: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DayTotal {
    #[schema(value_type = String, format = Date)]
    pub date: NaiveDate,
    pub count: i64,
    /// The day's sales less the credit notes issued that day.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub total: Decimal,
    /// The credit notes issued that day (already taken off `total`).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub returns_total: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PaymentTotal {
    pub payment_method: String,
    /// Sales paid this way.
    pub count: i64,
    /// Those sales less the credit notes refunded this way.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub total: Decimal,
    /// The credit notes refunded this way (already taken off `total`).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub returns_total: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TopMedicine {
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub name: String,
    /// Units sold less units returned on credit notes of the window.
    pub quantity: i64,
    /// Σ line totals (VAT included) less what the window's credit notes refunded.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub revenue: Decimal,
    /// The cost of goods sold, as the margins report counts it: Σ quantity
    /// × cost_at_sale, less the cost of units returns put back on the shelf.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub cost: Decimal,
    /// The margins report's gross margin: revenue net of VAT (and of the
    /// window's credit notes) − cost. Without VAT, revenue − cost.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub gross_profit: Decimal,
    /// gross_profit / revenue net of VAT in percent, one decimal (the
    /// margins report's `margin_pct`); 0 for zero revenue.
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
    let (totals, by_day, by_payment) = window_sums(c, s).await?;
    Ok(SalesReport {
        from_date: s.window.from,
        to_date: s.window.to,
        branch_id: s.branch,
        totals,
        by_day,
        by_payment,
        top_selling: top_selling(c, s).await?,
        recent_sales: recent_sales(c, s).await?,
    })
}

/// The window's days in `sales_days`, summed three ways in one scan (per
/// day, per payment or refund method, and in all): sales less the credit
/// notes issued in the window. Every day of the window is listed, with
/// zeros where nothing was sold; a method with refunds only is listed too.
pub(super) async fn window_sums<C: GenericClient + Sync>(
    c: &C,
    s: &Scope<'_>,
) -> Result<(SalesTotals, Vec<DayTotal>, Vec<PaymentTotal>)> {
    let (from, to, branch) = (s.window.from, s.window.to, s.branch);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT grouping(day, method), day, method,
                  coalesce(sum(sales_count), 0)::bigint,
                  coalesce(sum(sales_total - returns_total), 0),
                  coalesce(sum(sales_vat - returns_vat), 0),
                  coalesce(sum(sales_subtotal - returns_subtotal), 0),
                  coalesce(round(sum(sales_total - returns_total) / nullif(sum(sales_count), 0), 2), 0),
                  coalesce(sum(returns_count), 0)::bigint,
                  coalesce(sum(returns_total), 0)
           FROM sales_days
           WHERE day >= {from} AND day <= {to}
             AND ({branch}::uuid IS NULL OR branch_id = {branch})
           GROUP BY GROUPING SETS ((day), (method), ())"#
    );
    let rows = db::raw_planned(c, &q.sql, q.values).await?;
    let mut totals = None;
    let mut days: HashMap<NaiveDate, DayTotal> = HashMap::new();
    let mut methods = Vec::new();
    for r in &rows {
        match r.get::<_, i32>(0) {
            // Grouped by day (the method summed away).
            1 => {
                let date: NaiveDate = r.get(1);
                days.insert(
                    date,
                    DayTotal {
                        date,
                        count: r.get(3),
                        total: r.get(4),
                        returns_total: r.get(9),
                    },
                );
            }
            // Grouped by method.
            2 => {
                let (count, returns_count): (i64, i64) = (r.get(3), r.get(8));
                if count > 0 || returns_count > 0 {
                    methods.push(PaymentTotal {
                        payment_method: r.get(2),
                        count,
                        total: r.get(4),
                        returns_total: r.get(9),
                    });
                }
            }
            _ => {
                totals = Some(SalesTotals {
                    count: r.get(3),
                    revenue: r.get(4),
                    vat: r.get(5),
                    subtotal: r.get(6),
                    average: r.get(7),
                    returns_count: r.get(8),
                    returns_total: r.get(9),
                })
            }
        }
    }
    let totals = totals.ok_or_else(|| crate::Error::internal("aggregate query returned no row"))?;
    let by_day = from
        .iter_days()
        .take_while(|d| *d <= to)
        .map(|date| {
            days.remove(&date).unwrap_or(DayTotal {
                date,
                count: 0,
                total: Decimal::ZERO,
                returns_total: Decimal::ZERO,
            })
        })
        .collect();
    methods.sort_by(|a, b| {
        b.total
            .cmp(&a.total)
            .then_with(|| a.payment_method.cmp(&b.payment_method))
    });
    Ok((totals, by_day, methods))
}

/// Lines sold less lines credited per medicine (`medicine_sales`: whole
/// months from the monthly summary, the days around them from the daily
/// one); only the top ten meet the catalogue.
pub(super) async fn top_selling<C: GenericClient + Sync>(
    c: &C,
    s: &Scope<'_>,
) -> Result<Vec<TopMedicine>> {
    let (from, to, branch, limit) = (s.window.from, s.window.to, s.branch, TOP_SELLING);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT x.medicine_id, m.name, x.quantity, x.revenue, round(x.cost, 2),
                  round(x.net, 2), round(x.net, 2) - round(x.cost, 2)
           FROM medicine_sales({branch}::uuid, {from}::date, {to}::date) x
           JOIN medicines m ON m.id = x.medicine_id
           ORDER BY x.revenue DESC, m.name, x.medicine_id
           LIMIT {limit}"#
    );
    let rows = db::raw_planned(c, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| TopMedicine {
            medicine_id: r.get(0),
            name: r.get(1),
            quantity: r.get(2),
            revenue: r.get(3),
            cost: r.get(4),
            gross_profit: r.get(6),
            margin_pct: ratio_pct(r.get(6), r.get(5)),
        })
        .collect())
}

pub(super) async fn recent_sales<C: GenericClient + Sync>(
    c: &C,
    s: &Scope<'_>,
) -> Result<Vec<RecentSale>> {
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
