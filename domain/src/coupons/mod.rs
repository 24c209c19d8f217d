//! Coupons: the snapshot shape, creation, and redemption inside a sale.
//! `usage_count` rises by a conditional update in the sale's transaction, and
//! a CHECK keeps it at or below `max_uses`, so concurrent sales never overuse.

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, Query, SelectStatement};
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::db;
use crate::error::{Error, Result};
use crate::sync::changes::{self, Change, Op};
use crate::wire;

pub mod manage;

/// The snapshot Coupon shape (numbers, 0/1 flags), plus `rev`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Coupon {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub code: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// `percentage` or `fixed`.
    pub discount_type: String,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub discount_value: Decimal,
    pub description: String,
    /// `all`, `medicine` or `category`.
    pub applies_to: String,
    pub applies_to_id: Option<String>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub valid_from: Option<DateTime<Utc>>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub valid_until: Option<DateTime<Utc>>,
    pub max_uses: Option<i32>,
    pub image_url: String,
    pub usage_count: i32,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_active: bool,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_deleted: bool,
    /// Id of the user who created it ("" when unknown).
    pub created_by: String,
    pub rev: i64,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}

pub const COLUMNS: [&str; 19] = [
    "id",
    "code",
    "type",
    "discount_type",
    "discount_value",
    "description",
    "applies_to",
    "applies_to_id",
    "valid_from",
    "valid_until",
    "max_uses",
    "image_url",
    "usage_count",
    "is_active",
    "is_deleted",
    "created_by",
    "rev",
    "created_at",
    "updated_at",
];

impl Coupon {
    pub fn from_row(r: &Row) -> Self {
        Coupon {
            id: r.get("id"),
            code: r.get("code"),
            kind: r.get("type"),
            discount_type: r.get("discount_type"),
            discount_value: r.get("discount_value"),
            description: r.get("description"),
            applies_to: r.get("applies_to"),
            applies_to_id: r.get("applies_to_id"),
            valid_from: r.get("valid_from"),
            valid_until: r.get("valid_until"),
            max_uses: r.get("max_uses"),
            image_url: r.get("image_url"),
            usage_count: r.get("usage_count"),
            is_active: r.get("is_active"),
            is_deleted: r.get("is_deleted"),
            created_by: r
                .get::<_, Option<Uuid>>("created_by")
                .map(|u| u.to_string())
                .unwrap_or_default(),
            rev: r.get("rev"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
        }
    }

    /// The discount this coupon gives on a sale, spread over its lines:
    /// `lines` are (gross, eligible); the result has one amount per line.
    pub fn discounts(&self, lines: &[(Decimal, bool)]) -> Vec<Decimal> {
        let eligible: Decimal = lines.iter().filter(|l| l.1).map(|l| l.0).sum();
        let mut out = vec![Decimal::ZERO; lines.len()];
        if eligible.is_zero() {
            return out;
        }
        if self.discount_type == "percentage" {
            let pct = self.discount_value / Decimal::ONE_HUNDRED;
            for (slot, (gross, ok)) in out.iter_mut().zip(lines) {
                if *ok {
                    *slot = wire::two_places(*gross * pct).min(*gross);
                }
            }
            return out;
        }
        // Fixed amount: shared in proportion to each line's gross, the last
        // eligible line takes the rounding remainder.
        let total = self.discount_value.min(eligible);
        let last = lines.iter().rposition(|l| l.1).unwrap_or_default();
        let mut given = Decimal::ZERO;
        for (i, (slot, (gross, ok))) in out.iter_mut().zip(lines).enumerate() {
            if !*ok {
                continue;
            }
            let share = if i == last {
                total - given
            } else {
                wire::two_places(total * *gross / eligible)
            };
            let share = share.min(*gross);
            given += share;
            *slot = share;
        }
        out
    }

    /// Whether the coupon covers a line of `medicine_id` in `category`.
    pub fn covers(&self, medicine_id: Uuid, category: Option<&str>) -> bool {
        match self.applies_to.as_str() {
            "medicine" => self.applies_to_id.as_deref() == Some(&medicine_id.to_string()),
            "category" => self.applies_to_id.is_some() && self.applies_to_id.as_deref() == category,
            _ => true,
        }
    }
}

pub fn select() -> SelectStatement {
    Query::select()
        .columns(COLUMNS)
        .from(Table::Coupons)
        .to_owned()
}

/// A live coupon by code (already uppercased).
pub async fn by_code<C: GenericClient + Sync>(c: &C, code: &str) -> Result<Option<Coupon>> {
    let q = select()
        .and_where(Expr::col("code").eq(code))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Coupon::from_row(&r)))
}

/// Checks that a coupon may be used now; 400 naming why not.
pub fn check_usable(c: &Coupon, now: DateTime<Utc>) -> Result<()> {
    let refuse = |why: &str| {
        Err(Error::validation(
            "coupon_code",
            format!("Coupon {} {why}.", c.code),
        ))
    };
    if !c.is_active {
        return refuse("is not active");
    }
    if c.valid_from.is_some_and(|f| now < f) {
        return refuse("is not valid yet");
    }
    if c.valid_until.is_some_and(|u| now > u) {
        return refuse("has expired");
    }
    if c.max_uses.is_some_and(|m| c.usage_count >= m) {
        return refuse("has been used the maximum number of times");
    }
    Ok(())
}

/// Counts one use, unless that would pass `max_uses` (then 400).
pub async fn redeem<C: GenericClient + Sync>(tx: &C, coupon: &Coupon) -> Result<Coupon> {
    let rev = changes::allocate(tx).await?;
    let q = Query::update()
        .table(Table::Coupons)
        .value("usage_count", Expr::col("usage_count").add(1))
        .value("rev", rev)
        .value("updated_at", Utc::now())
        .and_where(Expr::col("id").eq(coupon.id))
        .and_where(
            Expr::col("max_uses")
                .is_null()
                .or(Expr::col("usage_count").lt(Expr::col("max_uses"))),
        )
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    let updated = db::fetch_opt(tx, &q)
        .await?
        .map(|r| Coupon::from_row(&r))
        .ok_or_else(|| {
            Error::validation(
                "coupon_code",
                format!(
                    "Coupon {} has been used the maximum number of times.",
                    coupon.code
                ),
            )
        })?;
    emit(tx, rev, &updated, Op::Update).await?;
    Ok(updated)
}

pub async fn emit<C: GenericClient + Sync>(tx: &C, rev: i64, c: &Coupon, op: Op) -> Result<()> {
    let change = Change {
        entity: "coupon",
        entity_id: c.id.to_string(),
        op,
        branch_id: None,
        payload: serde_json::to_value(c).map_err(Error::internal)?,
    };
    changes::append(tx, rev, change).await
}

/// A coupon to create (validated by the caller).
#[derive(Debug, Clone)]
pub struct NewCoupon {
    pub code: String,
    pub kind: String,
    pub discount_type: String,
    pub discount_value: Decimal,
    pub description: String,
    pub applies_to: String,
    pub applies_to_id: Option<String>,
    pub valid_from: Option<DateTime<Utc>>,
    pub valid_until: Option<DateTime<Utc>>,
    pub max_uses: Option<i32>,
    pub image_url: String,
    pub created_by: Uuid,
}

/// Inserts a coupon; a taken code is a 409.
pub async fn insert<C: GenericClient + Sync>(tx: &C, n: NewCoupon) -> Result<Coupon> {
    let rev = changes::allocate(tx).await?;
    let q = Query::insert()
        .into_table(Table::Coupons)
        .columns([
            "id",
            "code",
            "type",
            "discount_type",
            "discount_value",
            "description",
            "applies_to",
            "applies_to_id",
            "valid_from",
            "valid_until",
            "max_uses",
            "image_url",
            "created_by",
            "rev",
        ])
        .values_panic([
            Uuid::now_v7().into(),
            n.code.clone().into(),
            n.kind.into(),
            n.discount_type.into(),
            n.discount_value.into(),
            n.description.into(),
            n.applies_to.into(),
            n.applies_to_id.into(),
            n.valid_from.into(),
            n.valid_until.into(),
            n.max_uses.into(),
            n.image_url.into(),
            n.created_by.into(),
            rev.into(),
        ])
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    let coupon = match db::fetch_one(tx, &q).await {
        Ok(row) => Coupon::from_row(&row),
        Err(Error::Conflict(_)) => {
            return Err(Error::conflict(format!(
                "A coupon with code {} already exists.",
                n.code
            )))
        }
        Err(e) => return Err(e),
    };
    emit(tx, rev, &coupon, Op::Create).await?;
    Ok(coupon)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coupon(discount_type: &str, value: &str) -> Coupon {
        let at: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        Coupon {
            id: Uuid::from_u128(1),
            code: "SAVE".to_owned(),
            kind: "promo".to_owned(),
            discount_type: discount_type.to_owned(),
            discount_value: value.parse().unwrap(),
            description: String::new(),
            applies_to: "all".to_owned(),
            applies_to_id: None,
            valid_from: None,
            valid_until: None,
            max_uses: None,
            image_url: String::new(),
            usage_count: 0,
            is_active: true,
            is_deleted: false,
            created_by: String::new(),
            rev: 1,
            created_at: at,
            updated_at: at,
        }
    }

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    /// Lines as (gross, eligible) from ("12.50", true) pairs.
    fn lines(l: &[(&str, bool)]) -> Vec<(Decimal, bool)> {
        l.iter().map(|(g, ok)| (d(g), *ok)).collect()
    }

    fn amounts(v: &[Decimal]) -> Vec<String> {
        v.iter().map(|x| wire::two_places(*x).to_string()).collect()
    }

    #[test]
    fn a_percentage_is_taken_off_each_eligible_line_rounded_half_up() {
        let c = coupon("percentage", "15");
        let out = c.discounts(&lines(&[("99.99", true), ("40.00", false), ("0.10", true)]));
        // 14.9985 → 15.00; the ineligible line keeps its price; 0.015 → 0.02.
        assert_eq!(amounts(&out), ["15.00", "0.00", "0.02"]);
    }

    #[test]
    fn a_percentage_never_takes_more_than_the_line() {
        let c = coupon("percentage", "100");
        let out = c.discounts(&lines(&[("12.34", true), ("5.00", true)]));
        assert_eq!(amounts(&out), ["12.34", "5.00"]);
        // Above 100 % (refused when a coupon is created) still stops at the line.
        let c = coupon("percentage", "150");
        assert_eq!(amounts(&c.discounts(&lines(&[("8.00", true)]))), ["8.00"]);
    }

    #[test]
    fn a_fixed_amount_is_shared_by_line_value() {
        let c = coupon("fixed", "100");
        let out = c.discounts(&lines(&[("300.00", true), ("700.00", true)]));
        assert_eq!(amounts(&out), ["30.00", "70.00"]);
        // Ineligible lines neither get a share nor count in the proportion.
        let out = c.discounts(&lines(&[
            ("250.00", true),
            ("1000.00", false),
            ("750.00", true),
        ]));
        assert_eq!(amounts(&out), ["25.00", "0.00", "75.00"]);
    }

    #[test]
    fn the_last_eligible_line_takes_the_rounding_remainder() {
        // Thirds of 10.00: 3.33 + 3.33, and the remainder 3.34 on the last
        // eligible line (not the last line), so the lines add up to exactly
        // the coupon's value.
        let c = coupon("fixed", "10");
        let out = c.discounts(&lines(&[
            ("10.00", true),
            ("10.00", true),
            ("10.00", true),
            ("99.00", false),
        ]));
        assert_eq!(amounts(&out), ["3.33", "3.33", "3.34", "0.00"]);
        assert_eq!(out.iter().sum::<Decimal>(), d("10"));
        // Thirds of 5.00 round up (1.67), so the remainder is the smaller.
        let c = coupon("fixed", "5");
        let out = c.discounts(&lines(&[("3.00", true), ("3.00", true), ("3.00", true)]));
        assert_eq!(amounts(&out), ["1.67", "1.67", "1.66"]);
        assert_eq!(out.iter().sum::<Decimal>(), d("5"));
    }

    #[test]
    fn a_fixed_amount_is_capped_at_what_the_eligible_lines_cost() {
        let c = coupon("fixed", "500");
        let out = c.discounts(&lines(&[
            ("100.00", true),
            ("20.00", true),
            ("80.00", false),
        ]));
        assert_eq!(amounts(&out), ["100.00", "20.00", "0.00"]);
    }

    #[test]
    fn no_eligible_line_means_no_discount() {
        for c in [coupon("fixed", "10"), coupon("percentage", "10")] {
            let out = c.discounts(&lines(&[("100.00", false), ("20.00", false)]));
            assert_eq!(amounts(&out), ["0.00", "0.00"]);
            assert!(c.discounts(&[]).is_empty());
        }
    }

    #[test]
    fn covers_all_one_medicine_or_one_category() {
        let (m, other) = (Uuid::from_u128(7), Uuid::from_u128(8));
        let mut c = coupon("fixed", "1");
        assert!(c.covers(m, None));
        c.applies_to = "medicine".to_owned();
        c.applies_to_id = Some(m.to_string());
        assert!(c.covers(m, Some("analgesic")));
        assert!(!c.covers(other, Some("analgesic")));
        c.applies_to = "category".to_owned();
        c.applies_to_id = Some("analgesic".to_owned());
        assert!(c.covers(other, Some("analgesic")));
        assert!(!c.covers(other, Some("Analgesic")));
        assert!(!c.covers(other, None));
        // A category coupon without a category covers nothing, not the
        // medicines without one.
        c.applies_to_id = None;
        assert!(!c.covers(other, None));
    }

    #[test]
    fn check_usable_names_why_a_coupon_cannot_be_used() {
        let now: DateTime<Utc> = "2026-06-01T12:00:00Z".parse().unwrap();
        let why = |c: &Coupon| match check_usable(c, now) {
            Ok(()) => "usable".to_owned(),
            Err(e) => e.to_string(),
        };
        let fresh = coupon("fixed", "1");
        assert_eq!(why(&fresh), "usable");
        let mut c = fresh.clone();
        c.is_active = false;
        assert!(why(&c).contains("is not active"), "{}", why(&c));
        let mut c = fresh.clone();
        c.valid_from = Some("2026-06-01T12:00:01Z".parse().unwrap());
        assert!(why(&c).contains("is not valid yet"), "{}", why(&c));
        let mut c = fresh.clone();
        c.valid_until = Some("2026-06-01T11:59:59Z".parse().unwrap());
        assert!(why(&c).contains("has expired"), "{}", why(&c));
        // The bounds themselves are inside the window.
        let mut c = fresh.clone();
        c.valid_from = Some(now);
        c.valid_until = Some(now);
        assert_eq!(why(&c), "usable");
        let mut c = fresh.clone();
        c.max_uses = Some(3);
        c.usage_count = 2;
        assert_eq!(why(&c), "usable");
        c.usage_count = 3;
        assert!(why(&c).contains("maximum number of times"), "{}", why(&c));
    }
}
