//! The tables of the reports and books: one value is both the table a page
//! shows and the CSV its download link answers, so the two cannot differ.
//! Text cells go through the service's CSV formula guard
//! (`csv_export::neutralise`); figures are written as plain numbers (no
//! thousands separators), so a spreadsheet can add them up.

use actix_web::http::header;
use actix_web::HttpResponse;
use rust_decimal::Decimal;

use super::money;
use crate::csv_export::neutralise;
use domain::{Error, Result};

/// One cell: what the page shows, and what the CSV holds.
#[derive(Debug, Clone)]
pub struct Cell {
    pub shown: String,
    raw: String,
    pub numeric: bool,
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        let s = s.into();
        Cell {
            raw: s.clone(),
            shown: s,
            numeric: false,
        }
    }

    pub fn count(n: impl Into<i64>) -> Cell {
        let n = n.into();
        Cell {
            shown: n.to_string(),
            raw: n.to_string(),
            numeric: true,
        }
    }

    /// Money: `1,234.50` on the page, `1234.50` in the CSV.
    pub fn amount(d: Decimal) -> Cell {
        Cell {
            shown: money(d),
            raw: format!("{:.2}", d.round_dp(2)),
            numeric: true,
        }
    }

    /// A percentage as the API gives it (`12.5`).
    pub fn pct(d: Decimal) -> Cell {
        Cell {
            shown: format!("{}%", d.normalize()),
            raw: d.normalize().to_string(),
            numeric: true,
        }
    }

    fn csv(&self) -> String {
        if self.numeric {
            self.raw.clone()
        } else {
            neutralise(&self.raw).into_owned()
        }
    }
}

/// A titled table with its column headings.
#[derive(Debug, Clone)]
pub struct Table {
    /// The key of its CSV download (`?format=csv&table=<key>`).
    pub key: &'static str,
    pub caption: String,
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<Cell>>,
    /// A note under the table (how it is sorted, what it leaves out).
    pub note: String,
    /// The link of its CSV download; empty for none.
    pub csv_href: String,
}

impl Table {
    pub fn new(key: &'static str, caption: impl Into<String>, headers: &[&'static str]) -> Table {
        Table {
            key,
            caption: caption.into(),
            headers: headers.to_vec(),
            rows: Vec::new(),
            note: String::new(),
            csv_href: String::new(),
        }
    }

    /// Links the table's CSV download: the page's `path` and `query` (its
    /// filters) with `format=csv&table=<key>`.
    pub fn with_csv(mut self, path: &str, query: &str) -> Table {
        let kept: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .filter(|(k, _)| k != "format" && k != "table" && k != "page")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &kept {
            q.append_pair(k, v);
        }
        q.append_pair("format", "csv")
            .append_pair("table", self.key);
        self.csv_href = format!("{path}?{}", q.finish());
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Table {
        self.note = note.into();
        self
    }

    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    /// Whether column `i` holds figures (right-aligned on the page).
    pub fn numeric(&self, i: &usize) -> bool {
        self.rows
            .first()
            .and_then(|r| r.get(*i))
            .is_some_and(|c| c.numeric)
    }

    /// The table as CSV: the headings, then one line per row.
    pub fn to_csv(&self) -> Result<Vec<u8>> {
        let mut out = csv::Writer::from_writer(Vec::new());
        out.write_record(&self.headers).map_err(Error::internal)?;
        for row in &self.rows {
            out.write_record(row.iter().map(Cell::csv))
                .map_err(Error::internal)?;
        }
        out.into_inner().map_err(Error::internal)
    }
}

/// The table named `key` among `tables` as a CSV download named `name`;
/// 400 naming `table` when there is no such table.
pub fn download(name: &str, tables: &[Table], key: Option<&str>) -> Result<HttpResponse> {
    let table = match key.map(str::trim).filter(|k| !k.is_empty()) {
        None => tables.first(),
        Some(k) => tables.iter().find(|t| t.key == k),
    }
    .ok_or_else(|| Error::validation("table", "There is no such table on this page."))?;
    let body = table.to_csv()?;
    Ok(HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{name}-{}.csv\"", table.key),
        ))
        .body(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn the_csv_holds_the_rows_shown_with_formulas_neutralised() {
        let mut t = Table::new("t", "T", &["name", "total", "count"]);
        t.push(vec![
            Cell::text("=HYPERLINK(1)"),
            Cell::amount(Decimal::from_str("1234.5").unwrap()),
            Cell::count(-5),
        ]);
        let csv = String::from_utf8(t.to_csv().unwrap()).unwrap();
        assert_eq!(csv, "name,total,count\n'=HYPERLINK(1),1234.50,-5\n");
        assert_eq!(t.rows[0][1].shown, "1,234.50");
        assert!(t.numeric(&1));
        assert!(!t.numeric(&0));
    }

    #[test]
    fn an_unknown_table_is_refused_by_name() {
        let t = Table::new("a", "A", &["x"]);
        let err = download("r", &[t], Some("b")).unwrap_err();
        assert!(matches!(err, Error::Validation { field: Some(f), .. } if f == "table"));
    }
}
