//! Day windows in query strings (`from_date`, `to_date`, `YYYY-MM-DD`),
//! turned into instants by the organisation's time zone.
//!
//! A day is exactly `YYYY-MM-DD` (four, two and two digits: `2024-1-5` is
//! refused). A closed window (`or_last_days`: reports, the branch
//! comparison, CSV exports) spans at most [`MAX_WINDOW_DAYS`] days; lists
//! that page their answers keep open windows.

use chrono::{DateTime, NaiveDate, Utc};
use deadpool_postgres::GenericClient;
use serde::{Deserialize, Deserializer};

use crate::{db, Error, Result};

/// The longest closed window, in days (both ends inclusive): a leap year.
pub const MAX_WINDOW_DAYS: i64 = 366;

/// A day in a query string, exactly `YYYY-MM-DD`; anything else is a 400
/// naming the parameter (through the query extractor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Day(pub NaiveDate);

impl<'de> Deserialize<'de> for Day {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let raw = std::borrow::Cow::<'de, str>::deserialize(d)?;
        strict_day(&raw)
            .map(Day)
            .ok_or_else(|| serde::de::Error::custom(format!("`{raw}` is not a date as YYYY-MM-DD")))
    }
}

/// The day an optional query value names.
pub fn day_of(d: Option<Day>) -> Option<NaiveDate> {
    d.map(|d| d.0)
}

/// Exactly four digits, `-`, two digits, `-`, two digits, and a real date.
pub fn strict_day(v: &str) -> Option<NaiveDate> {
    let b = v.as_bytes();
    let shape = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        });
    if !shape {
        return None;
    }
    NaiveDate::parse_from_str(v, "%Y-%m-%d").ok()
}

/// Inclusive first and last day; either may be open.
#[derive(Debug, Clone, Copy)]
pub struct DateWindow {
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
}

/// `[start, end)` instants; `None` for an open side.
pub type Bounds = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

impl DateWindow {
    /// A window with either side optional; 400 when `from_date` is after `to_date`.
    pub fn optional(from: Option<NaiveDate>, to: Option<NaiveDate>) -> Result<Self> {
        if let (Some(f), Some(t)) = (from, to) {
            if f > t {
                return Err(Error::validation(
                    "from_date",
                    "`from_date` must not be after `to_date`.",
                ));
            }
        }
        Ok(DateWindow { from, to })
    }

    /// Start of the first day and start of the day after the last, in the
    /// organisation's time zone.
    pub async fn bounds<C: GenericClient + Sync>(&self, c: &C) -> Result<Bounds> {
        let (from, to) = (self.from, self.to.and_then(|d| d.succ_opt()));
        let q = sea_query::raw_query!(
            PostgresQueryBuilder,
            r#"SELECT {from}::date::timestamp AT TIME ZONE tz, {to}::date::timestamp AT TIME ZONE tz
               FROM (SELECT coalesce((SELECT time_zone FROM settings LIMIT 1), 'Africa/Kampala') AS tz) z"#
        );
        let row = db::raw_opt(c, &q.sql, q.values)
            .await?
            .ok_or_else(|| Error::internal("window query returned no row"))?;
        Ok((row.get(0), row.get(1)))
    }
}

/// A closed report window (`from_date`..=`to_date`, organisation time zone)
/// with its instants and the zone, so day and month buckets match the bounds.
#[derive(Debug, Clone)]
pub struct ReportWindow {
    pub from: NaiveDate,
    pub to: NaiveDate,
    /// Start of `from` in the organisation's zone.
    pub start: DateTime<Utc>,
    /// Start of the day after `to`.
    pub end: DateTime<Utc>,
    /// The organisation's IANA time zone (`settings.time_zone`).
    pub tz: String,
}

impl DateWindow {
    /// Closes the open sides: `to_date` defaults to the organisation's today,
    /// `from_date` to `days` days up to `to_date` (both inclusive). 400 naming
    /// `from_date` when it ends up after `to_date`.
    pub async fn or_last_days<C: GenericClient + Sync>(
        &self,
        c: &C,
        days: i64,
    ) -> Result<ReportWindow> {
        let (from, to, back) = (self.from, self.to, (days - 1).max(0) as i32);
        let q = sea_query::raw_query!(
            PostgresQueryBuilder,
            r#"SELECT f, t, f::timestamp AT TIME ZONE tz, (t + 1)::timestamp AT TIME ZONE tz, tz
               FROM (SELECT coalesce({from}::date, t - {back}::int) AS f, t, tz
                     FROM (SELECT coalesce({to}::date, org_today()) AS t,
                                  coalesce((SELECT time_zone FROM settings LIMIT 1), 'Africa/Kampala') AS tz) d) w"#
        );
        let row = db::raw_opt(c, &q.sql, q.values)
            .await?
            .ok_or_else(|| Error::internal("window query returned no row"))?;
        let window = ReportWindow {
            from: row.get(0),
            to: row.get(1),
            start: row.get(2),
            end: row.get(3),
            tz: row.get(4),
        };
        if window.from > window.to {
            return Err(Error::validation(
                "from_date",
                "`from_date` must not be after `to_date`.",
            ));
        }
        let span = (window.to - window.from).num_days() + 1;
        if span > MAX_WINDOW_DAYS {
            return Err(Error::validation(
                "from_date",
                format!(
                    "The window from `from_date` to `to_date` spans {span} days; \
                     at most {MAX_WINDOW_DAYS} are allowed."
                ),
            ));
        }
        Ok(window)
    }
}

impl DateWindow {
    /// Parses `from_date`/`to_date` query values (`YYYY-MM-DD`, blank = open):
    /// 400 naming the field on a bad date or when `from_date` is after `to_date`.
    pub fn parse(from_date: Option<&str>, to_date: Option<&str>) -> Result<Self> {
        DateWindow::optional(day("from_date", from_date)?, day("to_date", to_date)?)
    }
}

fn day(field: &str, value: Option<&str>) -> Result<Option<NaiveDate>> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match strict_day(v) {
        Some(d) => Ok(Some(d)),
        None => Err(Error::validation(
            field,
            format!("`{field}` must be a date as YYYY-MM-DD."),
        )),
    }
}

/// The document's schema of an optional day parameter read as text: a
/// `YYYY-MM-DD` date, or blank for the default.
pub fn day_or_blank() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{AnyOfBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type};
    AnyOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Date))),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^\\s*$")),
        )
        .into()
}

#[cfg(test)]
// Tests fail loudly by design.
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_day_is_exactly_four_two_two_digits() {
        let d = NaiveDate::from_ymd_opt(2024, 1, 5);
        assert_eq!(strict_day("2024-01-05"), d);
        for bad in [
            "2024-1-5",
            "2024-1-05",
            "2024-01-5",
            "+2024-01-5",
            "02024-01-05",
            "2024/01/05",
            "2024-13-01",
            "2024-02-30",
            " 2024-01-05",
            "2024-01-05 ",
            "",
            "２０２４-01-05",
        ] {
            assert_eq!(strict_day(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn day_deserialises_strictly() {
        #[derive(Deserialize)]
        struct Q {
            from_date: Option<Day>,
        }
        let ok: Q = serde_urlencoded::from_str("from_date=2024-02-29").unwrap();
        assert_eq!(day_of(ok.from_date), NaiveDate::from_ymd_opt(2024, 2, 29));
        assert!(serde_urlencoded::from_str::<Q>("from_date=2024-1-5").is_err());
        assert!(serde_urlencoded::from_str::<Q>("from_date=").is_err());
        let none: Q = serde_urlencoded::from_str("").unwrap();
        assert_eq!(none.from_date, None);
    }
}
