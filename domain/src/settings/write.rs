//! Changing the organisation's settings: the fields a write may send, the
//! rule of each, and the audited change (the API's `PUT /settings` and the
//! console's settings page both change them here).

use deadpool_postgres::Object;
use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer};
use utoipa::ToSchema;

use super::SettingsColumn as Col;
use super::{lock, time_zone_known, update, Fields, Settings};
use crate::db::Pool;
use crate::input::{self, max, Flag};
use crate::{audit, branches, Acting, Error, Result};
use sea_query::Iden;

/// Where the service runs: the vendor's hosting or the organisation's own.
pub const SERVER_MODES: [&str; 2] = ["hosted", "custom"];

/// Longest `server_url`, in characters: a scheme, a host and a port.
pub const MAX_SERVER_URL: usize = 255;

/// Tells a field sent as `null` (`Some(None)`: clear it) from one not sent.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> std::result::Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Every field optional; only the fields sent change. The text and flag
/// fields whose default is "not given" may be sent as `null` to clear them.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SettingsWrite {
    /// `null` restores the service's own name.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub name: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub legal_name: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub phone: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub email: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub address: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub tin: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub vat_number: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub nda_license_no: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub premise_no: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub receipt_header: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub receipt_footer: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub return_policy: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<bool>)]
    pub show_vat_breakdown: Option<Option<Flag>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<bool>)]
    pub show_pharmacist_on_receipt: Option<Option<Flag>>,
    #[schema(value_type = Option<bool>)]
    pub auto_print_receipt: Option<Flag>,
    /// A 3-letter code active in the currency registry.
    pub base_currency: Option<String>,
    /// 1..90.
    #[schema(minimum = 1, maximum = 90)]
    pub rate_staleness_days: Option<i64>,
    /// `hosted` or `custom`.
    pub server_mode: Option<String>,
    /// An http(s) address with no path, or empty.
    pub server_url: Option<String>,
    /// 0 or more.
    #[schema(minimum = 0)]
    pub default_low_stock_threshold: Option<i64>,
    /// Comma-separated positive day counts (`30,60,90`).
    pub expiry_warning_days: Option<String>,
    /// 1..20.
    #[schema(minimum = 1, maximum = 20)]
    pub default_copies: Option<i64>,
    #[schema(value_type = Option<bool>)]
    pub tax_enabled: Option<Flag>,
    /// A fraction 0..1 (0.18 = 18 percent), at most 4 decimals.
    #[schema(value_type = Option<f64>, minimum = 0, maximum = 1)]
    pub tax_rate: Option<Decimal>,
    /// An IANA time zone (`Africa/Kampala`).
    pub time_zone: Option<String>,
    /// 0..3650 days.
    #[schema(minimum = 0, maximum = 3650)]
    pub min_shelf_life_days: Option<i64>,
    /// 0..100 percent, at most 2 decimals.
    #[schema(value_type = Option<f64>, minimum = 0, maximum = 100)]
    pub invoice_price_tolerance_percent: Option<Decimal>,
}

fn int_in(field: &str, n: i64, min: i64, max: i64) -> Result<i32> {
    if (min..=max).contains(&n) {
        return i32::try_from(n).map_err(|_| Error::validation(field, "out of range"));
    }
    Err(Error::validation(
        field,
        format!("`{field}` must be a whole number from {min} to {max}."),
    ))
}

fn email(v: &str) -> Result<String> {
    let e = input::text("email", v, max::EMAIL)?;
    let address_like = e.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty() && domain.contains('.') && !domain.starts_with('.')
    }) && !e.contains(char::is_whitespace);
    let ok = e.is_empty() || address_like;
    if !ok {
        return Err(Error::validation(
            "email",
            "`email` must be an email address.",
        ));
    }
    Ok(e)
}

/// An http(s) address naming only a host (and port): the service's root.
fn server_url(v: &str) -> Result<String> {
    let v = v.trim();
    if v.is_empty() {
        return Ok(String::new());
    }
    let bad = || {
        Error::validation(
            "server_url",
            "`server_url` must be an http:// or https:// address with no path, such as https://pharmacy.example.org.",
        )
    };
    let lower = v.to_ascii_lowercase();
    let rest = ["http://", "https://"]
        .iter()
        .find_map(|s| lower.strip_prefix(s).map(|_| &v[s.len()..]))
        .ok_or_else(bad)?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    // `[v6]:port`, `[v6]`, `host:port` or `host`.
    let (host, port, v6) = match authority.strip_prefix('[') {
        Some(inner) => {
            let (h, after) = inner.split_once(']').ok_or_else(bad)?;
            match after {
                "" => (h, None, true),
                p => (h, Some(p.strip_prefix(':').ok_or_else(bad)?), true),
            }
        }
        None => match authority.split_once(':') {
            Some((h, p)) => (h, Some(p), false),
            None => (authority, None, false),
        },
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || (v6 && c == ':'));
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0));
    // Bytes, but only ASCII passes the host test, so characters too.
    if !host_ok || !port_ok || v.len() > MAX_SERVER_URL {
        return Err(bad());
    }
    Ok(format!("{}{authority}", &v[..v.len() - rest.len()]))
}

/// Positive day counts, stored ascending without repeats (`30,60,90`).
fn expiry_days(v: &str) -> Result<String> {
    let bad = || {
        Error::validation(
            "expiry_warning_days",
            "`expiry_warning_days` must be comma-separated day counts from 1 to 3650, such as 30,60,90.",
        )
    };
    let mut days = v
        .split(',')
        .map(|d| {
            d.trim()
                .parse::<u16>()
                .ok()
                .filter(|n| (1..=3650).contains(n))
        })
        .collect::<Option<Vec<u16>>>()
        .ok_or_else(bad)?;
    days.sort_unstable();
    days.dedup();
    if days.is_empty() || days.len() > 10 {
        return Err(bad());
    }
    let text: Vec<String> = days.iter().map(u16::to_string).collect();
    Ok(text.join(","))
}

fn tax_rate(v: Decimal) -> Result<Decimal> {
    let v = v.normalize();
    if v < Decimal::ZERO || v > Decimal::ONE || v.scale() > 4 {
        return Err(Error::validation(
            "tax_rate",
            "`tax_rate` must be a fraction from 0 to 1 with at most 4 decimals (0.18 is 18 percent).",
        ));
    }
    Ok(v)
}

fn percent(v: Decimal) -> Result<Decimal> {
    let field = "invoice_price_tolerance_percent";
    let v = input::amount(field, v)?;
    if v > Decimal::ONE_HUNDRED {
        return Err(Error::validation(
            field,
            format!("`{field}` must be a percent from 0 to 100."),
        ));
    }
    Ok(v)
}

fn one_of(field: &str, v: &str, allowed: &[&str]) -> Result<String> {
    let v = v.trim();
    if allowed.contains(&v) {
        return Ok(v.to_owned());
    }
    Err(Error::validation(
        field,
        format!("`{field}` must be one of {}.", allowed.join(", ")),
    ))
}

/// The free-text fields that may span lines (tabs and line breaks kept).
const MULTILINE: [Col; 3] = [Col::ReceiptHeader, Col::ReceiptFooter, Col::ReturnPolicy];

/// The free-text fields: trimmed, at most their column's length (the
/// CHECKs of migration 0014), `null` clears.
fn text_fields(b: &SettingsWrite, f: &mut Fields) -> Result<()> {
    for (col, v, limit) in [
        (Col::LegalName, &b.legal_name, max::NAME),
        (Col::Phone, &b.phone, max::CODE),
        (Col::Address, &b.address, max::ADDRESS),
        (Col::Tin, &b.tin, max::CODE),
        (Col::VatNumber, &b.vat_number, max::CODE),
        (Col::NdaLicenseNo, &b.nda_license_no, max::CODE),
        (Col::PremiseNo, &b.premise_no, max::CODE),
        (Col::ReceiptHeader, &b.receipt_header, max::NOTES),
        (Col::ReceiptFooter, &b.receipt_footer, max::NOTES),
        (Col::ReturnPolicy, &b.return_policy, max::NOTES),
    ] {
        match v {
            Some(Some(v)) if MULTILINE.contains(&col) => {
                f.set(col, input::multiline(col.unquoted(), v, limit)?)
            }
            Some(Some(v)) => f.set(col, input::text(col.unquoted(), v, limit)?),
            Some(None) => f.set(col, Option::<String>::None),
            None => {}
        }
    }
    match &b.name {
        Some(Some(v)) => f.set(Col::Name, input::required_text("name", v, max::NAME)?),
        Some(None) => f.set(Col::Name, Option::<String>::None),
        None => {}
    }
    match &b.email {
        Some(Some(v)) => f.set(Col::Email, email(v)?),
        Some(None) => f.set(Col::Email, Option::<String>::None),
        None => {}
    }
    Ok(())
}

fn flag_fields(b: &SettingsWrite, f: &mut Fields) {
    for (col, v) in [
        (Col::ShowVatBreakdown, b.show_vat_breakdown),
        (Col::ShowPharmacistOnReceipt, b.show_pharmacist_on_receipt),
    ] {
        if let Some(v) = v {
            f.set(col, v.map(|Flag(x)| x));
        }
    }
    for (col, v) in [
        (Col::AutoPrintReceipt, b.auto_print_receipt),
        (Col::TaxEnabled, b.tax_enabled),
    ] {
        if let Some(Flag(v)) = v {
            f.set(col, v);
        }
    }
}

/// The checks that need no database.
fn plain_fields(b: &SettingsWrite) -> Result<Fields> {
    let mut f = Fields::new();
    text_fields(b, &mut f)?;
    flag_fields(b, &mut f);
    if let Some(n) = b.rate_staleness_days {
        f.set(
            Col::RateStalenessDays,
            int_in("rate_staleness_days", n, 1, 90)?,
        );
    }
    if let Some(v) = &b.server_mode {
        f.set(Col::ServerMode, one_of("server_mode", v, &SERVER_MODES)?);
    }
    if let Some(v) = &b.server_url {
        f.set(Col::ServerUrl, server_url(v)?);
    }
    if let Some(n) = b.default_low_stock_threshold {
        let max = input::MAX_QUANTITY;
        let n = int_in("default_low_stock_threshold", n, 0, max)?;
        f.set(Col::DefaultLowStockThreshold, n);
    }
    if let Some(v) = &b.expiry_warning_days {
        f.set(Col::ExpiryWarningDays, expiry_days(v)?);
    }
    if let Some(n) = b.default_copies {
        f.set(Col::DefaultCopies, int_in("default_copies", n, 1, 20)?);
    }
    if let Some(v) = b.tax_rate {
        f.set(Col::TaxRate, tax_rate(v)?);
    }
    if let Some(n) = b.min_shelf_life_days {
        let n = int_in("min_shelf_life_days", n, 0, 3650)?;
        f.set(Col::MinShelfLifeDays, n);
    }
    if let Some(v) = b.invoice_price_tolerance_percent {
        f.set(Col::InvoicePriceTolerancePercent, percent(v)?);
    }
    Ok(f)
}

/// The checks against the registry and the database's zone list.
async fn looked_up_fields(client: &Object, b: &SettingsWrite, f: &mut Fields) -> Result<()> {
    if let Some(v) = &b.base_currency {
        let code = v.trim().to_uppercase();
        if code.len() != 3 || !branches::currency_active(client, &code).await? {
            return Err(Error::validation(
                "base_currency",
                format!("`base_currency` must be an active currency code; `{code}` is not."),
            ));
        }
        f.set(Col::BaseCurrency, code);
    }
    if let Some(v) = &b.time_zone {
        let zone = v.trim();
        if zone.is_empty() || !time_zone_known(client, zone).await? {
            return Err(Error::validation(
                "time_zone",
                "`time_zone` must be an IANA time zone such as Africa/Kampala.",
            ));
        }
        f.set(Col::TimeZone, zone.to_owned());
    }
    Ok(())
}

/// Changes the fields sent of the organisation's settings for `acting`
/// (who may `WriteSettings`): 400 names the first invalid field; the
/// change is audited (organisation-wide) with the record before and after.
pub async fn change(pool: &Pool, acting: &Acting, body: SettingsWrite) -> Result<Settings> {
    let mut fields = plain_fields(&body)?;
    let mut client = pool.get().await?;
    looked_up_fields(&client, &body, &mut fields).await?;
    if fields.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let tx = client.transaction().await?;
    let before = lock(&tx, acting.org_id).await?;
    let after = update(&tx, acting.org_id, fields, acting.user_id).await?;
    // Organisation-wide: every auditor reads it.
    audit::write_for(
        &tx,
        None,
        audit::Entry {
            actor_id: Some(acting.user_id),
            action: "settings.update",
            entity_type: "settings",
            entity_id: acting.org_id.to_string(),
            before: Some(as_json(&before)?),
            after: Some(as_json(&after)?),
        },
    )
    .await?;
    crate::db::commit(tx).await?;
    Ok(after)
}

fn as_json(s: &Settings) -> Result<serde_json::Value> {
    serde_json::to_value(s).map_err(Error::internal)
}
