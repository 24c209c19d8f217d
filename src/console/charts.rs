//! Charts drawn on the server as SVG: no script, nothing to load. Each one
//! is readable without colour: values are written beside the bars (branch
//! shares) or on the axis and in each bar's tooltip (the 30-day revenue),
//! the SVG carries a title and a description, and the page puts the same
//! figures in a table beside it.

use std::fmt::Write;

use chrono::NaiveDate;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;

use super::money;

/// Escapes text for SVG/XML content and attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const INK: &str = "#1b365d";
const GRID: &str = "#767676";

/// Revenue per day as vertical bars, oldest left, with the maximum and half
/// of it marked on the axis and every fifth day labelled.
pub fn daily_revenue(days: &[(NaiveDate, Decimal)], currency: &str) -> String {
    let (w, h) = (720.0_f64, 240.0_f64);
    let (left, right, top, bottom) = (78.0, 10.0, 16.0, 34.0);
    let plot_w = w - left - right;
    let plot_h = h - top - bottom;
    let max = days
        .iter()
        .map(|(_, v)| *v)
        .max()
        .unwrap_or_default()
        .max(Decimal::ZERO);
    let maxf = max.to_f64().unwrap_or(0.0);
    let slot = plot_w / days.len().max(1) as f64;
    let total: Decimal = days.iter().map(|(_, v)| *v).sum();
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" role="img" aria-labelledby="rev-title rev-desc" class="chart-svg">"#
    );
    let _ = write!(
        s,
        r#"<title id="rev-title">Revenue per day, last {n} days</title><desc id="rev-desc">{desc}</desc>"#,
        n = days.len(),
        desc = esc(&format!(
            "Bar chart. Highest day {} {currency}; total {} {currency}.",
            money(max),
            money(total)
        )),
    );
    // Axis lines and the two marked levels.
    for (frac, label) in [(1.0, money(max)), (0.5, money(max / Decimal::TWO))] {
        let y = top + plot_h * (1.0 - frac);
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="{GRID}" stroke-dasharray="4 4" stroke-width="1"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="12" fill="#000">{l}</text>"##,
            x2 = w - right,
            tx = left - 6.0,
            ty = y + 4.0,
            l = esc(&label),
        );
    }
    let base = top + plot_h;
    let _ = write!(
        s,
        r##"<line x1="{left}" y1="{base}" x2="{x2}" y2="{base}" stroke="#000" stroke-width="1"/><text x="{tx}" y="{ty}" text-anchor="end" font-size="12" fill="#000">0</text>"##,
        x2 = w - right,
        tx = left - 6.0,
        ty = base + 4.0,
    );
    for (i, (day, value)) in days.iter().enumerate() {
        let v = value.to_f64().unwrap_or(0.0).max(0.0);
        let bh = if maxf > 0.0 { plot_h * v / maxf } else { 0.0 };
        let x = left + slot * i as f64 + slot * 0.15;
        let _ = write!(
            s,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{bw:.1}" height="{bh:.1}" fill="{INK}"><title>{t}</title></rect>"#,
            y = base - bh,
            bw = slot * 0.7,
            t = esc(&format!("{day}: {} {currency}", money(*value))),
        );
        if i % 5 == 0 || i + 1 == days.len() {
            let _ = write!(
                s,
                r##"<text x="{cx:.1}" y="{ty}" text-anchor="middle" font-size="11" fill="#000">{d}</text>"##,
                cx = x + slot * 0.35,
                ty = base + 16.0,
                d = day.format("%d %b"),
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// One bar of the branch comparison.
pub struct Share<'a> {
    pub label: &'a str,
    pub revenue: Decimal,
    pub share_pct: Decimal,
    pub sales: i64,
}

/// Branches as horizontal bars of their share of revenue, each with its
/// name, share, revenue and sale count written out.
pub fn branch_shares(rows: &[Share<'_>], currency: &str) -> String {
    let row_h = 34.0_f64;
    let (w, label_w, top) = (720.0_f64, 190.0_f64, 8.0_f64);
    let bar_max = 300.0_f64;
    let h = top * 2.0 + row_h * rows.len().max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" role="img" aria-labelledby="share-title" class="chart-svg"><title id="share-title">Share of revenue by branch</title>"#
    );
    if rows.is_empty() {
        let _ = write!(
            s,
            r##"<text x="8" y="{y}" font-size="13" fill="#000">No branches.</text>"##,
            y = top + 20.0
        );
    }
    for (i, r) in rows.iter().enumerate() {
        let y = top + row_h * i as f64;
        let pct = r.share_pct.to_f64().unwrap_or(0.0).clamp(0.0, 100.0);
        let bw = bar_max * pct / 100.0;
        let label: String = r.label.chars().take(26).collect();
        let _ = write!(
            s,
            r##"<text x="{lx}" y="{ty:.1}" text-anchor="end" font-size="13" fill="#000">{l}</text><rect x="{bx}" y="{by:.1}" width="{bw:.1}" height="{bh}" fill="{INK}"/><rect x="{bx}" y="{by:.1}" width="{bar_max}" height="{bh}" fill="none" stroke="{GRID}" stroke-width="1"/><text x="{vx}" y="{ty:.1}" font-size="13" fill="#000">{v}</text>"##,
            lx = label_w - 8.0,
            ty = y + 21.0,
            l = esc(&label),
            bx = label_w,
            by = y + 6.0,
            bh = row_h - 12.0,
            vx = label_w + bar_max + 8.0,
            v = esc(&format!(
                "{}% · {} {currency} · {} {}",
                r.share_pct.normalize(),
                money(r.revenue),
                r.sales,
                if r.sales == 1 { "sale" } else { "sales" }
            )),
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn text_in_charts_is_escaped() {
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let rows = [Share {
            label: "<script>",
            revenue: Decimal::ONE,
            share_pct: Decimal::ONE_HUNDRED,
            sales: 1,
        }];
        let svg = branch_shares(&rows, "UGX");
        assert!(!svg.contains("<script>"));
        assert!(svg.contains("&lt;script&gt;"));
        assert!(svg.contains("100% · 1.00 UGX · 1 sale"));
    }

    #[test]
    fn the_tallest_bar_is_the_largest_day_and_an_empty_month_draws() {
        let d = |n: u32| NaiveDate::from_ymd_opt(2026, 1, n).unwrap();
        let days = [
            (d(1), Decimal::from_str("10").unwrap()),
            (d(2), Decimal::from_str("40").unwrap()),
        ];
        let svg = daily_revenue(&days, "UGX");
        assert!(svg.contains("2026-01-02: 40.00 UGX"));
        assert!(svg.contains(r#"height="190.0""#), "{svg}");
        let zero = daily_revenue(&[(d(1), Decimal::ZERO)], "UGX");
        assert!(zero.contains(r#"height="0.0""#));
    }
}
