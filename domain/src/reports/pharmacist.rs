//! Sales by pharmacist: each user and branch, revenue descending.

use chrono::NaiveDate;
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::Scope;
use crate::{db, wire, Result};

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
    /// The user's sales less the credit notes of the returns the user filed.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub revenue: Decimal,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub vat: Decimal,
    /// Average transaction value: revenue / count (0 without sales).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub average: Decimal,
    /// Credit notes of returns this user filed at this branch in the
    /// window (already taken off revenue and VAT).
    pub returns_count: i64,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub returns_total: Decimal,
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
                  x.n, x.revenue, x.vat, coalesce(round(x.revenue / nullif(x.n, 0), 2), 0),
                  x.returns_n, x.returns_total
           FROM (SELECT created_by, branch_id, sum(n)::bigint AS n, sum(revenue) AS revenue,
                        sum(vat) AS vat, sum(returns_n)::bigint AS returns_n,
                        sum(returns_total) AS returns_total
                 FROM (SELECT created_by, branch_id, count(*) AS n, sum(total) AS revenue,
                              sum(vat) AS vat, 0 AS returns_n, 0 AS returns_total
                       FROM sales
                       WHERE created_at >= {start} AND created_at < {end}
                         AND ({branch}::uuid IS NULL OR branch_id = {branch})
                       GROUP BY created_by, branch_id
                       UNION ALL
                       SELECT created_by, branch_id, 0, -sum(total), -sum(vat), count(*), sum(total)
                       FROM sale_returns
                       WHERE status = 'issued' AND issued_at >= {start} AND issued_at < {end}
                         AND ({branch}::uuid IS NULL OR branch_id = {branch})
                       GROUP BY created_by, branch_id) u
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
            returns_count: r.get(9),
            returns_total: r.get(10),
        })
        .collect();
    Ok(PharmacistReport {
        from_date: s.window.from,
        to_date: s.window.to,
        branch_id: s.branch,
        items,
    })
}
