//! `/currencies` (the ISO 4217 registry), `/currency/rates` (admins file
//! exchange rates against the base currency) and `/currency/branch` (the
//! caller's branch currency with the rate in force and its age).

use actix_web::{web, HttpResponse};
use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::http::extract::{Json, Query};
use crate::state::AppState;
use domain::currency::{self, Currency, NewRate, Rate};
use domain::error::Problem;
use domain::settings;
use domain::{wire, Action, Error, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(file_rate).service(branch);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CurrencyQuery {
    /// `true`: active currencies only; `false`: inactive only; absent: all.
    pub active: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CurrencyList {
    pub items: Vec<Currency>,
    pub total: i64,
}

/// The currency registry by code.
#[utoipa::path(tag = "currency", security(("bearer" = [])),
    params(CurrencyQuery),
    responses((status = 200, body = CurrencyList), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json")))]
#[get("/currencies")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller,
    Query(q): Query<CurrencyQuery>,
) -> Result<HttpResponse> {
    let client = state.pool.get().await?;
    let items = currency::list(&client, q.active).await?;
    let total = items.len() as i64;
    Ok(HttpResponse::Ok().json(CurrencyList { items, total }))
}

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

/// Files an exchange rate of a currency against the current base currency.
#[utoipa::path(tag = "currency", security(("bearer" = [])),
    request_body = RateWrite,
    responses((status = 201, body = Rate), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/currency/rates")]
pub async fn file_rate(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<RateWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageCurrencyRates)?;
    let code = body.currency_code.trim().to_uppercase();
    let rate = rate(body.rate)?;
    let effective_at = effective_at(body.effective_at.as_deref())?;
    let client = state.pool.get().await?;
    if !currency::get(&client, &code)
        .await?
        .is_some_and(|c| c.is_active)
    {
        return Err(Error::validation(
            "currency_code",
            format!("`currency_code` must be an active currency code; `{code}` is not."),
        ));
    }
    let base = settings::read(&client, caller.org_id).await?.base_currency;
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
        created_by: caller.user_id,
    };
    let filed = currency::insert_rate(&client, new).await?;
    Ok(HttpResponse::Created().json(filed))
}

/// `branch_id` is named only to refuse it: the branch is the session's.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BranchCurrencyQuery {
    /// Not accepted (400): the branch comes from the session. Left out of
    /// the document: no value is valid.
    #[param(ignore)]
    pub branch_id: Option<String>,
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

/// The branch currency of the session's branch. 400 when no rate is filed
/// for it; a branch in the base currency reads rate 1, never stale.
#[utoipa::path(tag = "currency", security(("bearer" = [])),
    params(BranchCurrencyQuery),
    responses((status = 200, body = BranchCurrency), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json")))]
#[get("/currency/branch")]
pub async fn branch(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<BranchCurrencyQuery>,
) -> Result<HttpResponse> {
    if q.branch_id.is_some() {
        return Err(Error::validation(
            "branch_id",
            "`branch_id` is not accepted here: the branch is the one you are signed in to.",
        ));
    }
    let client = state.pool.get().await?;
    let code = currency::branch_currency(&client, caller.branch_id)
        .await?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    let info = currency::get(&client, &code)
        .await?
        .ok_or_else(|| Error::internal(format!("branch currency {code} not in the registry")))?;
    let s = settings::read(&client, caller.org_id).await?;
    let now = Utc::now();
    let (rate, rate_id, effective_at) = if code == s.base_currency {
        (Decimal::ONE, String::new(), now)
    } else {
        let r = currency::current_rate(&client, &code, &s.base_currency)
            .await?
            .ok_or_else(|| {
                Error::bad_request(format!(
                    "No exchange rate is filed for {code} against {}; ask an admin to file one.",
                    s.base_currency
                ))
            })?;
        (r.rate, r.id.to_string(), r.effective_at)
    };
    let age_days = (now - effective_at).num_days().max(0);
    Ok(HttpResponse::Ok().json(BranchCurrency {
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
    }))
}
