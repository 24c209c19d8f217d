//! Customers (organisation-wide) and their ledger: reads and plain writes.
//! Balance changes live in `crate::customers` (payments, credit sales).

use crate::tables::Table;
use deadpool_postgres::GenericClient;
use sea_query::extension::postgres::PgExpr;
use sea_query::{Cond, Expr, ExprTrait, Iden, LockType, Order, Query};
use uuid::Uuid;

use super::balance::{emit, ledger_row, Customer, LedgerRow, COLUMNS};
use crate::input::{self, max, Flag};
use crate::sync::changes::Op;
use crate::{db, Action, Error, Result, Role};
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::paging::{self, Page};
use crate::patch::Patch;
use crate::sync::synced;
use crate::users::escape_like;

/// Live customers by name; `search` matches name or phone in part, or the
/// national id exactly.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    search: Option<&str>,
    page: Page,
) -> Result<(Vec<Customer>, i64)> {
    let mut base = Query::select()
        .from(Table::Customers)
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    if let Some(s) = search.map(str::trim).filter(|s| !s.is_empty()) {
        let pattern = format!("%{}%", escape_like(s));
        base.cond_where(
            Cond::any()
                .add(Expr::col("name").ilike(pattern.clone()))
                .add(Expr::col("phone").ilike(pattern))
                .add(Expr::col("national_id").eq(s)),
        );
    }
    let (rows, total) = paging::fetch(c, base, "id", page, |q| {
        q.columns(COLUMNS)
            .order_by_expr(Expr::cust("lower(name)"), Order::Asc)
            .order_by("id", Order::Asc);
    })
    .await?;
    let items = rows.iter().map(Customer::from_row).collect();
    Ok((items, total))
}

/// The customer columns a write sets.
#[derive(Iden, Clone, Copy)]
pub enum CustomerColumn {
    Id,
    Name,
    Phone,
    NationalId,
    Notes,
    ImageUrl,
    CreditLimit,
    IsCreditAllowed,
    IsDeleted,
}

/// A checked customer write.
pub type Fields = Patch<CustomerColumn>;

/// Create (`name` required) or update (only the fields to change) body.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct CustomerWrite {
    pub name: Option<String>,
    pub phone: Option<String>,
    pub national_id: Option<String>,
    pub notes: Option<String>,
    pub image_url: Option<String>,
    /// At least 0 (default 0).
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub credit_limit: Option<Decimal>,
    /// Default false.
    #[schema(value_type = Option<bool>)]
    pub is_credit_allowed: Option<Flag>,
}

pub fn fields(body: CustomerWrite) -> Result<Fields> {
    use CustomerColumn as Col;
    let mut f = Fields::new();
    if let Some(v) = body.name {
        f.set(Col::Name, input::required_text("name", &v, max::NAME)?);
    }
    for (col, v, limit) in [
        (Col::Phone, body.phone, max::CODE),
        (Col::NationalId, body.national_id, max::CODE),
        (Col::ImageUrl, body.image_url, max::URL),
    ] {
        if let Some(v) = v {
            f.set(col, input::text(col.unquoted(), &v, limit)?);
        }
    }
    if let Some(v) = body.notes {
        f.set(Col::Notes, input::multiline("notes", &v, max::NOTES)?);
    }
    if let Some(v) = body.credit_limit {
        f.set(Col::CreditLimit, input::amount("credit_limit", v)?);
    }
    if let Some(Flag(v)) = body.is_credit_allowed {
        f.set(Col::IsCreditAllowed, v);
    }
    Ok(f)
}

/// The credit a write would give, against the credit the customer has now
/// (`None` for a new customer): 403 when `role` may not give it. Giving
/// credit (`Action::GiveCredit`) is setting a credit limit above 0, raising
/// one, or allowing a customer to buy on credit. Other writers may still
/// lower a limit, set it to 0 or stop credit (the safe direction), and may
/// send the current values back unchanged (a till pushes whole records).
fn check_credit(role: Role, body: &CustomerWrite, current: Option<(Decimal, bool)>) -> Result<()> {
    if Action::GiveCredit.permits(role) {
        return Ok(());
    }
    let (limit_now, allowed_now) = current.unwrap_or((Decimal::ZERO, false));
    let raises = body
        .credit_limit
        .is_some_and(|l| l > Decimal::ZERO && l > limit_now);
    let allows = body
        .is_credit_allowed
        .is_some_and(|Flag(a)| a && !allowed_now);
    if raises || allows {
        let what = if raises {
            "raise a customer's credit limit"
        } else {
            "allow a customer to buy on credit"
        };
        return Err(Error::forbidden(format!(
            "Your role ({role}) may not {what}; an admin or a branch manager may."
        )));
    }
    Ok(())
}

/// Whether `body` touches credit at all (a limit above 0 or credit allowed).
fn gives_credit(body: &CustomerWrite) -> bool {
    body.credit_limit.is_some_and(|l| l > Decimal::ZERO)
        || body.is_credit_allowed.is_some_and(|Flag(a)| a)
}

/// The credit of a live customer, its row locked until the transaction ends
/// (a concurrent lowering cannot slip between the check and the write).
async fn locked_credit<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<(Decimal, bool)> {
    let q = Query::select()
        .columns(["credit_limit", "is_credit_allowed"])
        .from(Table::Customers)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .lock(LockType::Update)
        .to_owned();
    let row = db::fetch_opt(tx, &q)
        .await?
        .ok_or_else(|| Error::not_found("Customer not found"))?;
    Ok((row.get("credit_limit"), row.get("is_credit_allowed")))
}

/// 403 when an update of customer `id` by `role` would give credit.
pub async fn check_credit_edit<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    body: &CustomerWrite,
    role: Role,
) -> Result<()> {
    if gives_credit(body) && !Action::GiveCredit.permits(role) {
        let current = locked_credit(tx, id).await?;
        check_credit(role, body, Some(current))?;
    }
    Ok(())
}

/// Creates a customer (`name` required) for a caller of `role`; `id` when
/// the client chose it (a till that created the customer offline).
pub async fn create<C: GenericClient + Sync>(
    tx: &C,
    body: CustomerWrite,
    id: Option<Uuid>,
    role: Role,
) -> Result<Customer> {
    if body.name.is_none() {
        return Err(Error::validation("name", "The field `name` is required."));
    }
    check_credit(role, &body, None)?;
    let mut fields = fields(body)?;
    if let Some(id) = id {
        fields.set(CustomerColumn::Id, id);
    }
    insert(tx, fields).await
}

/// Applies the fields present in `body` to a live customer, for a caller of
/// `role`.
pub async fn edit<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    body: CustomerWrite,
    role: Role,
) -> Result<Customer> {
    check_credit_edit(tx, id, &body, role).await?;
    let fields = fields(body)?;
    if fields.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    update(tx, id, fields, Op::Update)
        .await?
        .ok_or_else(|| Error::not_found("Customer not found"))
}

/// Soft-deletes a customer who owes nothing (409 while a balance is owed).
pub async fn remove<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<Customer> {
    let fields = Fields::of(CustomerColumn::IsDeleted, true);
    let customer = update(tx, id, fields, Op::Delete)
        .await?
        .ok_or_else(|| Error::not_found("Customer not found"))?;
    if customer.current_balance > Decimal::ZERO {
        return Err(Error::conflict(format!(
            "{} still owes {}; record the payment before deleting.",
            customer.name,
            crate::wire::two_places(customer.current_balance)
        )));
    }
    Ok(customer)
}

pub async fn insert<C: GenericClient + Sync>(tx: &C, fields: Fields) -> Result<Customer> {
    let (row, rev) = synced::insert(tx, Table::Customers, &COLUMNS, fields).await?;
    let customer = Customer::from_row(&row);
    emit(tx, rev, &customer, Op::Create).await?;
    Ok(customer)
}

/// Updates (or, with `Op::Delete`, soft-deletes) a live customer.
pub async fn update<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    fields: Fields,
    op: Op,
) -> Result<Option<Customer>> {
    let Some((row, rev)) = synced::update(tx, Table::Customers, &COLUMNS, id, fields).await? else {
        return Ok(None);
    };
    let customer = Customer::from_row(&row);
    emit(tx, rev, &customer, op).await?;
    Ok(Some(customer))
}

/// A customer's ledger, newest first, paged.
pub async fn ledger<C: GenericClient + Sync>(
    c: &C,
    customer_id: Uuid,
    page: Page,
) -> Result<(Vec<LedgerRow>, i64)> {
    let ledger = Query::select()
        .from_as(Table::CustomerLedger, "l")
        .and_where(Expr::col(("l", "customer_id")).eq(customer_id))
        .to_owned();
    let (rows, total) = paging::fetch(c, ledger, ("l", "id"), page, |q| {
        q.expr(Expr::cust("l.*"))
            .expr_as(Expr::cust("coalesce(u.full_name, '')"), "created_by_name")
            .join_as(
                sea_query::JoinType::LeftJoin,
                Table::Users,
                "u",
                Expr::col(("u", "id")).equals(("l", "created_by")),
            )
            .order_by(("l", "created_at"), Order::Desc)
            .order_by(("l", "id"), Order::Desc);
    })
    .await?;
    Ok((rows.iter().map(ledger_row).collect(), total))
}
