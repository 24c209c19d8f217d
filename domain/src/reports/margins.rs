//! Margins: revenue net of VAT and of credit notes, the cost of what was
//! sold at its batches' cost (less what returns put back on the shelf),
//! and the gross margin, per medicine, category or day.

use chrono::NaiveDate;
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::Serialize;
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{first, ratio_pct, Scope};
use crate::error::Result;
use crate::input;
use crate::{db, wire};

/// How margins are grouped.
pub const GROUP_BY: [&str; 3] = ["medicine", "category", "day"];

/// One group's (or the window's) figures.
#[derive(Debug, Default, Clone, Serialize, ToSchema)]
pub struct MarginRow {
    /// The medicine's id, the category (empty for none) or the day
    /// (`YYYY-MM-DD`, organisation time zone); empty on the totals.
    pub key: String,
    /// The medicine's name, the category or the day.
    pub name: String,
    /// Sales net of VAT, less the credit notes issued in the window.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub revenue: Decimal,
    /// Batch cost of the units sold, less the cost of units returns put
    /// back on the shelf in the window.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub cost_of_goods_sold: Decimal,
    /// `revenue − cost_of_goods_sold`.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub gross_margin: Decimal,
    /// `100 × gross_margin / revenue`, one decimal; 0 when revenue is 0.
    #[serde(serialize_with = "super::decimal_num")]
    #[schema(value_type = f64)]
    pub margin_pct: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MarginReport {
    #[schema(value_type = String, format = Date)]
    pub from_date: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub to_date: NaiveDate,
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    /// `medicine`, `category` or `day`.
    pub group_by: String,
    /// Highest revenue first (by day: oldest first).
    pub items: Vec<MarginRow>,
    pub totals: MarginRow,
}

/// `group_by` checked: `medicine` (the default), `category` or `day`.
pub fn group_by(raw: Option<&str>) -> Result<String> {
    let g = input::one_of_or_blank("group_by", raw, &GROUP_BY)?;
    Ok(g.unwrap_or_else(|| GROUP_BY[0].to_owned()))
}

/// The window's margins, grouped as `group`. Sale lines count on the day
/// they were sold, credit notes on the day they were issued: per medicine
/// (and so per category) from `medicine_sales`, per day from `sales_days`.
pub async fn margins<C: GenericClient + Sync>(
    c: &C,
    s: &Scope<'_>,
    group: &str,
) -> Result<MarginReport> {
    let w = s.window;
    let (from, to, branch, group_text) = (w.from, w.to, s.branch, group.to_owned());
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH keyed AS (
               SELECT CASE {group_text} WHEN 'category' THEN coalesce(m.category, '')
                                        ELSE m.id::text END AS key,
                      CASE {group_text} WHEN 'category' THEN coalesce(m.category, '')
                                        ELSE m.name END AS name,
                      x.net AS revenue, x.cost
               FROM medicine_sales({branch}::uuid, {from}::date, {to}::date) x
               JOIN medicines m ON m.id = x.medicine_id
               WHERE {group_text} <> 'day'
               UNION ALL
               SELECT to_char(day, 'YYYY-MM-DD'), to_char(day, 'YYYY-MM-DD'),
                      sum(taxable_0 + taxable_std), sum(cost)
               FROM sales_days
               WHERE {group_text} = 'day' AND day >= {from} AND day <= {to}
                 AND ({branch}::uuid IS NULL OR branch_id = {branch})
               GROUP BY day
               HAVING sum(sale_lines) > 0 OR sum(return_lines) > 0)
           SELECT grouping(key), key, name, coalesce(round(sum(revenue), 2), 0),
                  coalesce(round(sum(cost), 2), 0)
           FROM keyed
           GROUP BY GROUPING SETS ((key, name), ())
           ORDER BY 1 DESC,
                    CASE WHEN {group_text} = 'day' THEN key END,
                    4 DESC, 3, 2"#
    );
    let rows = db::raw_planned(c, &q.sql, q.values).await?;
    let row = |r: &Row| {
        let (revenue, cost): (Decimal, Decimal) = (r.get(3), r.get(4));
        MarginRow {
            key: r.get::<_, Option<String>>(1).unwrap_or_default(),
            name: r.get::<_, Option<String>>(2).unwrap_or_default(),
            revenue,
            cost_of_goods_sold: cost,
            gross_margin: revenue - cost,
            margin_pct: ratio_pct(revenue - cost, revenue),
        }
    };
    Ok(MarginReport {
        from_date: w.from,
        to_date: w.to,
        branch_id: s.branch,
        group_by: group.to_owned(),
        totals: row(first(&rows)?),
        items: rows
            .iter()
            .filter(|r| r.get::<_, i32>(0) == 0)
            .map(row)
            .collect(),
    })
}
