//! The ISO 4217 currency registry and the exchange rates filed against the
//! base currency (`rate` = units of the currency per one unit of the base).

use crate::tables::Table;
use chrono::{DateTime, NaiveDate, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, Order, Query};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{db, settings, wire, Error, Result};

/// A registry entry.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Currency {
    pub code: String,
    pub name: String,
    pub symbol: String,
    /// Minor-unit digits per ISO 4217 (UGX 0, USD 2, KWD 3).
    pub exponent: i32,
    pub is_active: bool,
}

impl Currency {
    fn from_row(r: &Row) -> Self {
        Currency {
            code: r.get("code"),
            name: r.get("name"),
            symbol: r.get("symbol"),
            exponent: r.get("exponent"),
            is_active: r.get("is_active"),
        }
    }
}

const CURRENCY_COLUMNS: [&str; 5] = ["code", "name", "symbol", "exponent", "is_active"];

/// The registry by code; `active` filters on the flag.
pub async fn list<C: GenericClient + Sync>(c: &C, active: Option<bool>) -> Result<Vec<Currency>> {
    let mut q = Query::select()
        .columns(CURRENCY_COLUMNS)
        .from(Table::Currencies)
        .order_by("code", Order::Asc)
        .to_owned();
    if let Some(a) = active {
        q.and_where(Expr::col("is_active").eq(a));
    }
    Ok(db::fetch_all(c, &q)
        .await?
        .iter()
        .map(Currency::from_row)
        .collect())
}

pub async fn get<C: GenericClient + Sync>(c: &C, code: &str) -> Result<Option<Currency>> {
    let q = Query::select()
        .columns(CURRENCY_COLUMNS)
        .from(Table::Currencies)
        .and_where(Expr::col("code").eq(code))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Currency::from_row(&r)))
}

/// A filed exchange rate.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Rate {
    #[schema(value_type = String)]
    pub id: Uuid,
    /// The same as `id`, under the name the branch-currency read uses.
    #[schema(value_type = String)]
    pub rate_id: Uuid,
    pub currency_code: String,
    pub base_currency_code: String,
    /// Units of `currency_code` per one unit of `base_currency_code`.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub rate: Decimal,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub effective_at: DateTime<Utc>,
    #[schema(value_type = Option<String>)]
    pub created_by: Option<Uuid>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
}

impl Rate {
    fn from_row(r: &Row) -> Self {
        Rate {
            id: r.get("id"),
            rate_id: r.get("id"),
            currency_code: r.get("currency_code"),
            base_currency_code: r.get("base_currency_code"),
            rate: r.get::<_, Decimal>("rate").normalize(),
            effective_at: r.get("effective_at"),
            created_by: r.get("created_by"),
            created_at: r.get("created_at"),
        }
    }
}

const RATE_COLUMNS: [&str; 7] = [
    "id",
    "currency_code",
    "base_currency_code",
    "rate",
    "effective_at",
    "created_by",
    "created_at",
];

pub struct NewRate {
    pub currency_code: String,
    pub base_currency_code: String,
    pub rate: Decimal,
    pub effective_at: DateTime<Utc>,
    pub created_by: Uuid,
}

/// Files a rate; rates are never edited (a new one supersedes).
pub async fn insert_rate<C: GenericClient + Sync>(c: &C, r: NewRate) -> Result<Rate> {
    let q = Query::insert()
        .into_table(Table::ExchangeRates)
        .columns([
            "id",
            "currency_code",
            "base_currency_code",
            "rate",
            "effective_at",
            "created_by",
        ])
        .values_panic([
            Uuid::now_v7().into(),
            r.currency_code.into(),
            r.base_currency_code.into(),
            r.rate.into(),
            r.effective_at.into(),
            r.created_by.into(),
        ])
        .returning(Query::returning().columns(RATE_COLUMNS))
        .to_owned();
    Ok(Rate::from_row(&db::fetch_one(c, &q).await?))
}

/// The rate in force now for the pair: the latest `effective_at` not in the
/// future (a later filing wins a tie).
pub async fn current_rate<C: GenericClient + Sync>(
    c: &C,
    currency_code: &str,
    base_currency_code: &str,
) -> Result<Option<Rate>> {
    let q = Query::select()
        .columns(RATE_COLUMNS)
        .from(Table::ExchangeRates)
        .and_where(Expr::col("currency_code").eq(currency_code))
        .and_where(Expr::col("base_currency_code").eq(base_currency_code))
        .and_where(Expr::col("effective_at").lte(Expr::cust("now()")))
        .order_by("effective_at", Order::Desc)
        .order_by("created_at", Order::Desc)
        .order_by("id", Order::Desc)
        .limit(1)
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Rate::from_row(&r)))
}

/// The currency code of a live branch.
pub async fn branch_currency<C: GenericClient + Sync>(
    c: &C,
    branch_id: Uuid,
) -> Result<Option<String>> {
    let q = Query::select()
        .column("currency_code")
        .from(Table::Branches)
        .and_where(Expr::col("id").eq(branch_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| r.get(0)))
}

/// `POST /currency/rates` as a client sends it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RateWrite {
    /// An active currency other than the base currency.
    pub currency_code: String,
    /// Units of `currency_code` per one unit of the base currency; > 0, at
    /// most 10 decimals.
    #[schema(value_type = f64)]
    pub rate: Decimal,
    /// RFC 3339, or `YYYY-MM-DD` (00:00 UTC). Default: now. A future rate
    /// takes effect at that time.
    pub effective_at: Option<String>,
}

fn rate(v: Decimal) -> Result<Decimal> {
    let v = v.normalize();
    if v <= Decimal::ZERO || v.scale() > 10 || v >= Decimal::from(100_000_000_000_000_i64) {
        return Err(Error::validation(
            "rate",
            "`rate` must be a number greater than zero with at most 10 decimals.",
        ));
    }
    Ok(v)
}

/// An RFC 3339 timestamp, or a bare date meaning 00:00 UTC of that day.
fn effective_at(value: Option<&str>) -> Result<DateTime<Utc>> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Utc::now());
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(v) {
        return Ok(t.with_timezone(&Utc));
    }
    match NaiveDate::parse_from_str(v, "%Y-%m-%d") {
        Ok(d) if v.len() == 10 => Ok(d.and_time(chrono::NaiveTime::MIN).and_utc()),
        _ => Err(Error::validation(
            "effective_at",
            "`effective_at` must be an RFC 3339 timestamp or a YYYY-MM-DD date.",
        )),
    }
}

/// Files an exchange rate of an active currency against the organisation's
/// current base currency (never the base currency itself).
pub async fn file_rate<C: GenericClient + Sync>(
    c: &C,
    org_id: Uuid,
    created_by: Uuid,
    w: RateWrite,
) -> Result<Rate> {
    let code = w.currency_code.trim().to_uppercase();
    let rate = rate(w.rate)?;
    let effective_at = effective_at(w.effective_at.as_deref())?;
    if !get(c, &code).await?.is_some_and(|x| x.is_active) {
        return Err(Error::validation(
            "currency_code",
            format!("`currency_code` must be an active currency code; `{code}` is not."),
        ));
    }
    let base = settings::read(c, org_id).await?.base_currency;
    if code == base {
        return Err(Error::validation(
            "currency_code",
            format!("{base} is the base currency; its rate is always 1."),
        ));
    }
    let new = NewRate {
        currency_code: code,
        base_currency_code: base,
        rate,
        effective_at,
        created_by,
    };
    insert_rate(c, new).await
}

/// The caller's branch currency and the rate in force.
#[derive(Debug, Serialize, ToSchema)]
pub struct BranchCurrency {
    pub currency_code: String,
    pub base_currency_code: String,
    pub name: String,
    pub symbol: String,
    pub exponent: i32,
    /// Units of the branch currency per one unit of the base currency.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub rate: Decimal,
    /// The filed rate's id; empty when the branch uses the base currency.
    pub rate_id: String,
    /// When the rate took effect; the time of the read for the base currency.
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub effective_at: DateTime<Utc>,
    /// `age_days` is above the settings' `rate_staleness_days`.
    pub is_stale: bool,
    /// Whole days since `effective_at`.
    pub age_days: i64,
}

/// The branch currency of `branch_id` and the rate in force. 400 when no
/// rate is filed for it; a branch in the base currency reads rate 1, never
/// stale.
pub async fn branch_view<C: GenericClient + Sync>(
    c: &C,
    branch_id: Uuid,
    org_id: Uuid,
) -> Result<BranchCurrency> {
    let code = branch_currency(c, branch_id)
        .await?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    let info = get(c, &code)
        .await?
        .ok_or_else(|| Error::internal(format!("branch currency {code} not in the registry")))?;
    let s = settings::read(c, org_id).await?;
    let now = Utc::now();
    let (rate, rate_id, effective_at) = if code == s.base_currency {
        (Decimal::ONE, String::new(), now)
    } else {
        let r = current_rate(c, &code, &s.base_currency)
            .await?
            .ok_or_else(|| {
                Error::bad_request(format!(
                    "No exchange rate is filed for {code} against {}; ask an admin to file one.",
                    s.base_currency
                ))
            })?;
        (r.rate, r.id.to_string(), r.effective_at)
    };
    let age_days = Ord::max((now - effective_at).num_days(), 0);
    Ok(BranchCurrency {
        currency_code: code,
        base_currency_code: s.base_currency,
        name: info.name,
        symbol: info.symbol,
        exponent: info.exponent,
        rate,
        rate_id,
        effective_at,
        is_stale: age_days > i64::from(s.rate_staleness_days),
        age_days,
    })
}
