//! Day windows in query strings (`from_date`, `to_date`, `YYYY-MM-DD`),
//! turned into instants by the organisation's time zone.

use chrono::{DateTime, NaiveDate, Utc};
use deadpool_postgres::GenericClient;

use actors::{db, Error, Result};

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
    match NaiveDate::parse_from_str(v, "%Y-%m-%d") {
        Ok(d) if v.len() == 10 => Ok(Some(d)),
        _ => Err(Error::validation(
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
