//! Reading sales back: one, a filtered page, and the row mappers.

use crate::tables::Table;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, Order, Query};
use tokio_postgres::Row;
use uuid::Uuid;

use super::model::{Sale, SaleItem};
use super::plan::percent;
use crate::error::Result;
use crate::{db, wire};

pub(super) const SALE_COLUMNS: &str = "s.id, s.branch_id, s.icv, s.invoice_number, s.customer_id, \
    s.prescription_id, s.coupon_code, s.payment_method, s.discount, s.subtotal, s.vat, s.total, \
    s.cash_session_id, s.device_id, s.client_mutation_id, s.status, s.previous_invoice_hash, \
    s.invoice_hash, s.created_by, coalesce(u.full_name, '') AS created_by_name, s.rev, s.created_at";

pub(super) fn sale_from_row(r: &Row) -> Sale {
    Sale {
        id: r.get("id"),
        branch_id: r.get("branch_id"),
        icv: r.get("icv"),
        invoice_number: r.get("invoice_number"),
        customer_id: r.get("customer_id"),
        prescription_id: r.get("prescription_id"),
        coupon_code: r.get("coupon_code"),
        payment_method: r.get("payment_method"),
        discount: r.get("discount"),
        subtotal: r.get("subtotal"),
        vat: r.get("vat"),
        total: r.get("total"),
        cash_session_id: r.get("cash_session_id"),
        device_id: r.get("device_id"),
        client_mutation_id: r.get("client_mutation_id"),
        status: r.get("status"),
        previous_invoice_hash: r.get("previous_invoice_hash"),
        invoice_hash: r.get("invoice_hash"),
        created_by: r.get("created_by"),
        created_by_name: r.get("created_by_name"),
        rev: r.get("rev"),
        created_at: r.get("created_at"),
        items: Vec::new(),
        fiscal: None,
    }
}

pub(super) fn item_from_row(r: &Row) -> SaleItem {
    let rate: Decimal = r.get("vat_rate");
    // Stored in base units; answered in what the line counted.
    let base: i32 = r.get("quantity");
    let units: i32 = r.get("pack_units");
    SaleItem {
        id: r.get("id"),
        medicine_id: r.get("medicine_id"),
        medicine_name: r.get("medicine_name"),
        batch_id: r.get("batch_id"),
        quantity: base / Ord::max(units, 1),
        pack_id: r.get("pack_id"),
        pack_units: units,
        base_quantity: base,
        serial: r.get("serial"),
        gtin: r.get("gtin"),
        unit_price: r.get("unit_price"),
        discount: r.get("discount"),
        line_total: r.get("line_total"),
        vat_rate: percent(rate),
        vat_amount: r.get("vat_amount"),
        // Stored with 4 places; shown with 2 unless the batch's cost has more.
        cost_at_sale: wire::cost_places(r.get("cost_at_sale")),
    }
}

/// Fills in the lines of `sales`.
pub(super) async fn with_items<C: GenericClient + Sync>(
    c: &C,
    mut sales: Vec<Sale>,
) -> Result<Vec<Sale>> {
    if sales.is_empty() {
        return Ok(sales);
    }
    let ids: Vec<Uuid> = sales.iter().map(|s| s.id).collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT i.*, m.name AS medicine_name FROM sale_items i
           JOIN medicines m ON m.id = i.medicine_id
           WHERE i.sale_id = ANY({ids}) ORDER BY i.sale_id, i.line_no, i.id"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let mut by_sale: HashMap<Uuid, Vec<SaleItem>> = HashMap::new();
    for r in &rows {
        by_sale
            .entry(r.get("sale_id"))
            .or_default()
            .push(item_from_row(r));
    }
    for s in &mut sales {
        s.items = by_sale.remove(&s.id).unwrap_or_default();
    }
    Ok(sales)
}

/// One sale with its lines.
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Sale>> {
    let rows = select_sales(c, |q| {
        q.and_where(Expr::col(("s", "id")).eq(id));
    })
    .await?;
    Ok(with_items(c, rows).await?.into_iter().next())
}

/// One sale as `GET /sales/{id}` shows it: with its invoice's fiscal status.
pub async fn get_shown<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Sale>> {
    let mut sale = get(c, id).await?;
    if let Some(s) = sale.as_mut() {
        s.fiscal = crate::fiscal::read::status_of(c, crate::fiscal::Kind::T109, s.id).await?;
    }
    Ok(sale)
}

/// The sale with this invoice number (within `branch_id` when given), as
/// `get_shown` answers it: the console's lookup by the number on a receipt.
/// Numbers are stored in capitals; the one typed is matched as typed or in
/// capitals.
pub async fn by_invoice_number<C: GenericClient + Sync>(
    c: &C,
    number: &str,
    branch_id: Option<Uuid>,
) -> Result<Option<Sale>> {
    let number = number.trim();
    let upper = number.to_uppercase();
    let rows = select_sales(c, |q| {
        q.and_where(Expr::col(("s", "invoice_number")).is_in([number.to_owned(), upper]));
        if let Some(b) = branch_id {
            q.and_where(Expr::col(("s", "branch_id")).eq(b));
        }
        q.limit(1);
    })
    .await?;
    let Some(id) = rows.first().map(|s| s.id) else {
        return Ok(None);
    };
    get_shown(c, id).await
}

/// Filters for a sales list.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub branch_id: Option<Uuid>,
    pub from: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

/// Newest first, paged; returns the page and the total.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ListFilter,
    offset: u64,
    limit: u64,
) -> Result<(Vec<Sale>, i64)> {
    let filter = |q: &mut sea_query::SelectStatement| {
        if let Some(b) = f.branch_id {
            q.and_where(Expr::col(("s", "branch_id")).eq(b));
        }
        if let Some(from) = f.from {
            q.and_where(Expr::col(("s", "created_at")).gte(from));
        }
        if let Some(until) = f.until {
            q.and_where(Expr::col(("s", "created_at")).lt(until));
        }
    };
    let mut count = Query::select()
        .expr(Expr::cust("count(*)"))
        .from_as(Table::Sales, "s")
        .to_owned();
    filter(&mut count);
    let total: i64 = db::fetch_one(c, &count).await?.get(0);
    let rows = select_sales(c, |q| {
        filter(q);
        q.order_by(("s", "created_at"), Order::Desc)
            .order_by(("s", "id"), Order::Desc)
            .offset(offset)
            .limit(limit);
    })
    .await?;
    Ok((with_items(c, rows).await?, total))
}

pub(super) async fn select_sales<C: GenericClient + Sync>(
    c: &C,
    shape: impl FnOnce(&mut sea_query::SelectStatement),
) -> Result<Vec<Sale>> {
    let mut q = Query::select()
        .expr(Expr::cust(SALE_COLUMNS))
        .from_as(Table::Sales, "s")
        .join_as(
            sea_query::JoinType::LeftJoin,
            Table::Users,
            "u",
            Expr::col(("u", "id")).equals(("s", "created_by")),
        )
        .to_owned();
    shape(&mut q);
    Ok(db::fetch_all(c, &q)
        .await?
        .iter()
        .map(sale_from_row)
        .collect())
}
