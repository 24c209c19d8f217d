//! Cash sessions: one open session per branch at a time. The branch actor
//! serialises opens in this process; the partial unique index
//! `cash_sessions_one_open_per_branch` makes it hold across processes.

use crate::tables::Table;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::wire;
use actors::runtime::Command;

/// The spec's cash session shape.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CashSession {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub user_id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "50000.00")]
    pub opening_float: Decimal,
    /// `open` or `closed`.
    pub status: String,
    pub break_minutes: i32,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub opened_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub closed_at: Option<DateTime<Utc>>,
    pub total_sales: i32,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub total_revenue: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub total_vat: Decimal,
    /// JSON object text: payment method → amount (`{"cash":"1200.00"}`).
    pub payment_breakdown: String,
    /// Credit notes issued at the branch while the session was open.
    pub refund_count: i32,
    /// What those credit notes refunded, every method.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub total_refunds: Decimal,
    /// JSON object text: refund method → amount refunded (`{"cash":"500.00"}`).
    pub refund_breakdown: String,
    /// Set when the session is closed.
    #[serde(serialize_with = "wire::money_str_opt")]
    #[schema(value_type = Option<String>)]
    pub counted_cash: Option<Decimal>,
    /// `opening_float` plus the cash taken minus the cash refunded, set when
    /// the session is closed.
    #[serde(serialize_with = "wire::money_str_opt")]
    #[schema(value_type = Option<String>)]
    pub expected_cash: Option<Decimal>,
    /// `counted_cash - expected_cash`, set when the session is closed.
    #[serde(serialize_with = "wire::money_str_opt")]
    #[schema(value_type = Option<String>)]
    pub variance: Option<Decimal>,
}

/// Columns read for a `CashSession`, in `from_row` order.
pub const COLUMNS: [&str; 18] = [
    "id",
    "user_id",
    "branch_id",
    "opening_float",
    "status",
    "break_minutes",
    "opened_at",
    "closed_at",
    "total_sales",
    "total_revenue",
    "total_vat",
    "payment_breakdown",
    "refund_count",
    "total_refunds",
    "refund_breakdown",
    "counted_cash",
    "expected_cash",
    "variance",
];

/// A breakdown object as text, amounts as decimal strings with two places
/// like every other money string.
fn breakdown_text(breakdown: serde_json::Value) -> String {
    let breakdown: serde_json::Map<String, serde_json::Value> = breakdown
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let amount = v.to_string().trim_matches('"').parse().unwrap_or_default();
                    (k.clone(), wire::two_places(amount).to_string().into())
                })
                .collect()
        })
        .unwrap_or_default();
    serde_json::Value::Object(breakdown).to_string()
}

impl CashSession {
    pub fn from_row(r: &Row) -> Self {
        CashSession {
            id: r.get("id"),
            user_id: r.get("user_id"),
            branch_id: r.get("branch_id"),
            opening_float: r.get("opening_float"),
            status: r.get("status"),
            break_minutes: r.get("break_minutes"),
            opened_at: r.get("opened_at"),
            closed_at: r.get("closed_at"),
            total_sales: r.get("total_sales"),
            total_revenue: r.get("total_revenue"),
            total_vat: r.get("total_vat"),
            payment_breakdown: breakdown_text(r.get("payment_breakdown")),
            refund_count: r.get("refund_count"),
            total_refunds: r.get("total_refunds"),
            refund_breakdown: breakdown_text(r.get("refund_breakdown")),
            counted_cash: r.get("counted_cash"),
            expected_cash: r.get("expected_cash"),
            variance: r.get("variance"),
        }
    }
}

/// Opens the branch's cash session, or returns the one already open.
pub struct OpenSession {
    pub branch_id: Uuid,
    pub user_id: Uuid,
    pub opening_float: Decimal,
}

impl Command for OpenSession {
    type Error = crate::Error;
    type Output = CashSession;
    const NAME: &'static str = "open_session";

    async fn run(self, pool: Pool) -> Result<CashSession> {
        let client = pool.get().await?;
        let id = Uuid::now_v7();
        let (branch_id, user_id, float) = (self.branch_id, self.user_id, self.opening_float);
        // Another process may have opened one between our insert and our read,
        // or closed it: loop until one of the two statements sees a session.
        for _ in 0..5 {
            let insert = sea_query::raw_query!(
                PostgresQueryBuilder,
                r#"INSERT INTO cash_sessions (id, user_id, branch_id, opening_float, status)
                   VALUES ({id}, {user_id}, {branch_id}, {float}, 'open')
                   ON CONFLICT (branch_id) WHERE status = 'open' DO NOTHING
                   RETURNING *"#
            );
            if let Some(row) = db::raw_opt(&client, &insert.sql, insert.values).await? {
                return Ok(CashSession::from_row(&row));
            }
            if let Some(open) = current(&client, branch_id).await? {
                return Ok(open);
            }
        }
        Err(Error::busy("The cash session is changing; please retry."))
    }
}

/// Closes an open session: freezes its totals (already counted sale by
/// sale), and records the counted cash, the expected cash and the variance.
pub struct CloseSession {
    pub session_id: Uuid,
    pub user_id: Uuid,
    pub counted_cash: Decimal,
}

impl Command for CloseSession {
    type Error = crate::Error;
    type Output = CashSession;
    const NAME: &'static str = "close_session";

    async fn run(self, pool: Pool) -> Result<CashSession> {
        let client = pool.get().await?;
        let (id, user, counted) = (self.session_id, self.user_id, self.counted_cash);
        // The row lock this UPDATE takes waits for sales and refunds still
        // adding to the session, and the WHERE re-checks `open` after the
        // wait. Cash refunds left the drawer.
        let q = sea_query::raw_query!(
            PostgresQueryBuilder,
            r#"UPDATE cash_sessions SET
                 status = 'closed', closed_at = now(), closed_by = {user},
                 counted_cash = {counted},
                 expected_cash = opening_float + coalesce((payment_breakdown ->> 'cash')::numeric, 0)
                                 - coalesce((refund_breakdown ->> 'cash')::numeric, 0),
                 variance = {counted} - (opening_float + coalesce((payment_breakdown ->> 'cash')::numeric, 0)
                                         - coalesce((refund_breakdown ->> 'cash')::numeric, 0))
               WHERE id = {id} AND status = 'open'
               RETURNING *"#
        );
        if let Some(row) = db::raw_opt(&client, &q.sql, q.values).await? {
            return Ok(CashSession::from_row(&row));
        }
        match get(&client, id).await? {
            Some(_) => Err(Error::conflict("This cash session is already closed.")),
            None => Err(Error::not_found("Cash session not found")),
        }
    }
}

/// A session by id.
pub async fn get<C: deadpool_postgres::GenericClient + Sync>(
    client: &C,
    id: Uuid,
) -> Result<Option<CashSession>> {
    use sea_query::{Expr, ExprTrait, Query};
    let q = Query::select()
        .columns(COLUMNS)
        .from(Table::CashSessions)
        .and_where(Expr::col("id").eq(id))
        .to_owned();
    Ok(db::fetch_opt(client, &q)
        .await?
        .map(|r| CashSession::from_row(&r)))
}

/// The branch's open session, if any.
pub async fn current<C: deadpool_postgres::GenericClient + Sync>(
    client: &C,
    branch_id: Uuid,
) -> Result<Option<CashSession>> {
    use sea_query::{Expr, ExprTrait, Query};
    let q = Query::select()
        .columns(COLUMNS)
        .from(Table::CashSessions)
        .and_where(Expr::col("branch_id").eq(branch_id))
        .and_where(Expr::col("status").eq("open"))
        .to_owned();
    Ok(db::fetch_opt(client, &q)
        .await?
        .map(|r| CashSession::from_row(&r)))
}

/// Adds a credit note's refund to the branch's open session, if one is open
/// (one row, the session's id, or none).
pub fn refund_stmt(branch_id: Uuid, method: &str, total: Decimal) -> db::Stmt {
    let path = vec![method.to_owned()];
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE cash_sessions SET
             refund_count = refund_count + 1,
             total_refunds = total_refunds + {total},
             refund_breakdown = jsonb_set(refund_breakdown, {path},
               to_jsonb(coalesce((refund_breakdown ->> {method}::text)::numeric, 0) + {total}))
           WHERE branch_id = {branch_id} AND status = 'open'
           RETURNING id"#
    );
    db::Stmt::raw(q.sql, q.values)
}
