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
