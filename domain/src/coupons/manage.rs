//! Creating and listing coupons: the create body, its rules (a targeted
//! coupon's medicine or category must exist) and the coupon as the coupon
//! endpoints answer it.

use crate::tables::Table;
use chrono::{DateTime, NaiveDate, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, Order, Query};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{insert, select, Coupon, NewCoupon};
use crate::db::{self, Pool};
use crate::input::{self, max};
use crate::paging::Page;
use crate::{wire, Error, Result};

/// How a coupon discounts: a percentage of the line, or a fixed amount.
pub const DISCOUNT_TYPES: [&str; 2] = ["percentage", "fixed"];

/// Longest coupon description, in characters.
pub const MAX_DESCRIPTION: usize = 500;

#[derive(Debug, Deserialize, ToSchema)]
pub struct CouponCreate {
    /// Stored trimmed and uppercased; unique.
    pub code: String,
    /// Default `promotional`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `percentage` or `fixed`.
    pub discount_type: String,
    /// Above 0; at most 100 for a percentage.
    #[schema(value_type = f64)]
    pub discount_value: Decimal,
    pub description: Option<String>,
    /// RFC 3339 timestamp, or `YYYY-MM-DD` for the start of that day (UTC).
    pub valid_from: Option<String>,
    /// RFC 3339 timestamp, or `YYYY-MM-DD` for the start of that day (UTC).
    pub valid_until: Option<String>,
    /// A whole number of at least 1; null for unlimited.
    #[schema(value_type = Option<i32>, minimum = 1)]
    pub max_uses: Option<Decimal>,
    /// `all` (default), `medicine` or `category`.
    pub applies_to: Option<String>,
    /// The medicine id or category slug when `applies_to` is not `all`.
    pub applies_to_id: Option<String>,
    pub image_url: Option<String>,
}

/// A coupon as the coupon endpoints answer it (`is_active` a boolean,
/// `discount_value` a number).
#[derive(Debug, Serialize, ToSchema)]
pub struct CouponView {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    pub code: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub discount_type: String,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub discount_value: Decimal,
    pub is_active: bool,
    pub usage_count: i32,
    pub description: String,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub valid_from: Option<DateTime<Utc>>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub valid_until: Option<DateTime<Utc>>,
    pub max_uses: Option<i32>,
    pub applies_to: String,
    pub applies_to_id: Option<String>,
    pub image_url: String,
    pub created_by: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}

impl From<Coupon> for CouponView {
    fn from(c: Coupon) -> Self {
        CouponView {
            id: c.id,
            code: c.code,
            kind: c.kind,
            discount_type: c.discount_type,
            discount_value: c.discount_value,
            is_active: c.is_active,
            usage_count: c.usage_count,
            description: c.description,
            valid_from: c.valid_from,
            valid_until: c.valid_until,
            max_uses: c.max_uses,
            applies_to: c.applies_to,
            applies_to_id: c.applies_to_id,
            image_url: c.image_url,
            created_by: c.created_by,
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

/// An RFC 3339 timestamp, or a bare date meaning 00:00 UTC of that day.
fn instant(field: &str, value: Option<&str>) -> Result<Option<DateTime<Utc>>> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(v) {
        return Ok(Some(t.with_timezone(&Utc)));
    }
    match NaiveDate::parse_from_str(v, "%Y-%m-%d") {
        Ok(d) if v.len() == 10 => Ok(Some(d.and_time(chrono::NaiveTime::MIN).and_utc())),
        _ => Err(Error::validation(
            field,
            format!("`{field}` must be an RFC 3339 timestamp or a YYYY-MM-DD date."),
        )),
    }
}

fn code(raw: &str) -> Result<String> {
    let c = input::required_text("code", raw, max::COUPON_CODE)?.to_uppercase();
    // Upper case can be longer than the text it comes from (`ß` is `SS`).
    if c.chars().count() > max::COUPON_CODE || c.chars().any(char::is_control) {
        return Err(Error::validation(
            "code",
            format!(
                "`code` must be at most {} printable characters.",
                max::COUPON_CODE
            ),
        ));
    }
    Ok(c)
}

/// Checks the body; the medicine or category a coupon targets must exist.
async fn validate<C: GenericClient + Sync>(
    client: &C,
    body: CouponCreate,
    created_by: Uuid,
) -> Result<NewCoupon> {
    let code = code(&body.code)?;
    let kind = match body
        .kind
        .as_deref()
        .map(|k| input::text("type", k, max::CODE))
    {
        Some(k) => Some(k?).filter(|k| !k.is_empty()),
        None => None,
    }
    .unwrap_or_else(|| "promotional".to_owned());
    let discount_type = body.discount_type.trim().to_lowercase();
    if !DISCOUNT_TYPES.contains(&discount_type.as_str()) {
        return Err(Error::validation(
            "discount_type",
            "`discount_type` must be `percentage` or `fixed`.",
        ));
    }
    let discount_value = input::positive_amount("discount_value", body.discount_value)?;
    if discount_type == "percentage" && discount_value > Decimal::ONE_HUNDRED {
        return Err(Error::validation(
            "discount_value",
            "A percentage discount cannot be above 100.",
        ));
    }
    let valid_from = instant("valid_from", body.valid_from.as_deref())?;
    let valid_until = instant("valid_until", body.valid_until.as_deref())?;
    if let (Some(from), Some(until)) = (valid_from, valid_until) {
        if until < from {
            return Err(Error::validation(
                "valid_until",
                "`valid_until` must not be before `valid_from`.",
            ));
        }
    }
    let max_uses = body
        .max_uses
        .map(|m| input::whole("max_uses", m, 1))
        .transpose()?;
    let applies_to = body
        .applies_to
        .map(|a| a.trim().to_lowercase())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "all".to_owned());
    let applies_to_id = match applies_to.as_str() {
        "all" => None,
        "medicine" | "category" => Some(target(client, &applies_to, body.applies_to_id).await?),
        _ => {
            return Err(Error::validation(
                "applies_to",
                "`applies_to` must be `all`, `medicine` or `category`.",
            ))
        }
    };
    Ok(NewCoupon {
        code,
        kind,
        discount_type,
        discount_value,
        description: input::multiline(
            "description",
            body.description.as_deref().unwrap_or(""),
            MAX_DESCRIPTION,
        )?,
        applies_to,
        applies_to_id,
        valid_from,
        valid_until,
        max_uses,
        image_url: input::text(
            "image_url",
            body.image_url.as_deref().unwrap_or(""),
            max::URL,
        )?,
        created_by,
    })
}

/// The medicine id or category slug a targeted coupon names; 400 unless it exists.
async fn target<C: GenericClient + Sync>(
    client: &C,
    applies_to: &str,
    id: Option<String>,
) -> Result<String> {
    let id = id.map(|i| i.trim().to_owned()).unwrap_or_default();
    let missing = || {
        Error::validation(
            "applies_to_id",
            format!("`applies_to_id` must name an existing {applies_to}."),
        )
    };
    if id.is_empty() {
        return Err(missing());
    }
    // Stored as the sale path compares it: a hyphenated uuid or a slug.
    let (q, canonical) = if applies_to == "medicine" {
        let uuid = Uuid::parse_str(&id).map_err(|_| missing())?;
        let q = Query::select()
            .expr(Expr::cust("1"))
            .from(Table::Medicines)
            .and_where(Expr::col("id").eq(uuid))
            .and_where(Expr::col("is_deleted").eq(false))
            .to_owned();
        (q, uuid.to_string())
    } else {
        let slug = id.to_lowercase();
        let q = Query::select()
            .expr(Expr::cust("1"))
            .from(Table::Categories)
            .and_where(Expr::col("slug").eq(slug.clone()))
            .to_owned();
        (q, slug)
    };
    db::fetch_opt(client, &q).await?.ok_or_else(missing)?;
    Ok(canonical)
}

/// Creates a coupon by `created_by` (409 for a code in use).
pub async fn create(pool: &Pool, body: CouponCreate, created_by: Uuid) -> Result<CouponView> {
    let mut client = pool.get().await?;
    let coupon = validate(&client, body, created_by).await?;
    let tx = client.transaction().await?;
    let created = insert(&tx, coupon).await?;
    crate::db::commit(tx).await?;
    Ok(CouponView::from(created))
}

/// Live coupons, newest first, one page of them and the count of all.
pub async fn live<C: GenericClient + Sync>(
    client: &C,
    page: Page,
) -> Result<(Vec<CouponView>, i64)> {
    let live = Expr::col("is_deleted")
        .eq(false)
        .and(Expr::col("is_active").eq(true));
    let q = select()
        .and_where(live.clone())
        .order_by("created_at", Order::Desc)
        .order_by("id", Order::Desc)
        .limit(page.limit())
        .offset(page.offset())
        .to_owned();
    let items: Vec<CouponView> = db::fetch_all(client, &q)
        .await?
        .iter()
        .map(|r| CouponView::from(Coupon::from_row(r)))
        .collect();
    let count = Query::select()
        .expr(Expr::cust("count(*)"))
        .from(Table::Coupons)
        .and_where(live)
        .to_owned();
    let total: i64 = db::fetch_one(client, &count).await?.get(0);
    Ok((items, total))
}
