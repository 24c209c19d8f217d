//! The organisation settings form, with each refused field's message
//! beside it. It saves through the same domain function as `PUT /settings`.

use std::str::FromStr;

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use rust_decimal::Decimal;
use serde::Deserialize;

use super::people::DoneQuery;
use super::{html_status, see_other, when, Chrome, Notice, Outcome, Posted, Staff};
use crate::state::AppState;
use domain::input::Flag;
use domain::settings::write::{self as settings_write, SettingsWrite};
use domain::{settings, Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/settings", web::get().to(settings_page))
        .route("/settings", web::post().to(save_settings));
}

/// The settings form's fields as text, as stored or as sent.
#[derive(Debug, Default, Deserialize)]
pub struct SettingsForm {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub legal_name: String,
    #[serde(default)]
    pub phone: String,
    #[serde(default)]
    pub email: String,
    #[serde(default)]
    pub address: String,
    #[serde(default)]
    pub tin: String,
    #[serde(default)]
    pub vat_number: String,
    #[serde(default)]
    pub nda_license_no: String,
    #[serde(default)]
    pub premise_no: String,
    #[serde(default)]
    pub receipt_header: String,
    #[serde(default)]
    pub receipt_footer: String,
    #[serde(default)]
    pub return_policy: String,
    pub show_vat_breakdown: Option<String>,
    pub show_pharmacist_on_receipt: Option<String>,
    pub auto_print_receipt: Option<String>,
    #[serde(default)]
    pub base_currency: String,
    #[serde(default)]
    pub rate_staleness_days: String,
    #[serde(default)]
    pub server_mode: String,
    #[serde(default)]
    pub server_url: String,
    #[serde(default)]
    pub default_low_stock_threshold: String,
    #[serde(default)]
    pub expiry_warning_days: String,
    #[serde(default)]
    pub default_copies: String,
    pub tax_enabled: Option<String>,
    #[serde(default)]
    pub tax_rate: String,
    #[serde(default)]
    pub time_zone: String,
    #[serde(default)]
    pub min_shelf_life_days: String,
    #[serde(default)]
    pub invoice_price_tolerance_percent: String,
}

fn on(flag: Option<bool>) -> Option<String> {
    flag.filter(|f| *f).map(|_| "on".to_owned())
}

impl SettingsForm {
    fn of(s: &settings::Settings) -> SettingsForm {
        let t = |v: &Option<String>| v.clone().unwrap_or_default();
        SettingsForm {
            name: s.name.clone(),
            legal_name: t(&s.legal_name),
            phone: t(&s.phone),
            email: t(&s.email),
            address: t(&s.address),
            tin: t(&s.tin),
            vat_number: t(&s.vat_number),
            nda_license_no: t(&s.nda_license_no),
            premise_no: t(&s.premise_no),
            receipt_header: t(&s.receipt_header),
            receipt_footer: t(&s.receipt_footer),
            return_policy: t(&s.return_policy),
            show_vat_breakdown: on(s.show_vat_breakdown),
            show_pharmacist_on_receipt: on(s.show_pharmacist_on_receipt),
            auto_print_receipt: on(Some(s.auto_print_receipt)),
            base_currency: s.base_currency.clone(),
            rate_staleness_days: s.rate_staleness_days.to_string(),
            server_mode: s.server_mode.clone(),
            server_url: s.server_url.clone(),
            default_low_stock_threshold: s.default_low_stock_threshold.to_string(),
            expiry_warning_days: s.expiry_warning_days.clone(),
            default_copies: s.default_copies.to_string(),
            tax_enabled: on(Some(s.tax_enabled)),
            tax_rate: s.tax_rate.normalize().to_string(),
            time_zone: s.time_zone.clone(),
            min_shelf_life_days: s.min_shelf_life_days.to_string(),
            invoice_price_tolerance_percent: s
                .invoice_price_tolerance_percent
                .normalize()
                .to_string(),
        }
    }

    /// The form as the API's write: every field sent, a blank text field
    /// cleared, an unticked box off. Numbers that are not numbers are
    /// refused here, naming their field.
    fn write(&self) -> Result<SettingsWrite, Error> {
        let text = |v: &str| Some((!v.trim().is_empty()).then(|| v.to_owned()));
        let whole = |field: &str, v: &str| -> Result<Option<i64>, Error> {
            v.trim()
                .parse()
                .map(Some)
                .map_err(|_| Error::validation(field, format!("{field} must be a whole number.")))
        };
        let flag = |v: &Option<String>| Flag(v.is_some());
        let tax_rate = Decimal::from_str(self.tax_rate.trim()).map_err(|_| {
            Error::validation("tax_rate", "tax_rate must be a fraction such as 0.18.")
        })?;
        Ok(SettingsWrite {
            name: text(&self.name),
            legal_name: text(&self.legal_name),
            phone: text(&self.phone),
            email: text(&self.email),
            address: text(&self.address),
            tin: text(&self.tin),
            vat_number: text(&self.vat_number),
            nda_license_no: text(&self.nda_license_no),
            premise_no: text(&self.premise_no),
            receipt_header: text(&self.receipt_header),
            receipt_footer: text(&self.receipt_footer),
            return_policy: text(&self.return_policy),
            show_vat_breakdown: Some(Some(flag(&self.show_vat_breakdown))),
            show_pharmacist_on_receipt: Some(Some(flag(&self.show_pharmacist_on_receipt))),
            auto_print_receipt: Some(flag(&self.auto_print_receipt)),
            base_currency: Some(self.base_currency.clone()),
            rate_staleness_days: whole("rate_staleness_days", &self.rate_staleness_days)?,
            server_mode: Some(self.server_mode.clone()),
            server_url: Some(self.server_url.clone()),
            default_low_stock_threshold: whole(
                "default_low_stock_threshold",
                &self.default_low_stock_threshold,
            )?,
            expiry_warning_days: Some(self.expiry_warning_days.clone()),
            default_copies: whole("default_copies", &self.default_copies)?,
            tax_enabled: Some(flag(&self.tax_enabled)),
            tax_rate: Some(tax_rate),
            time_zone: Some(self.time_zone.clone()),
            // Blank leaves a buying rule as it is.
            min_shelf_life_days: match self.min_shelf_life_days.trim() {
                "" => None,
                v => whole("min_shelf_life_days", v)?,
            },
            invoice_price_tolerance_percent: match self.invoice_price_tolerance_percent.trim() {
                "" => None,
                v => Some(Decimal::from_str(v).map_err(|_| {
                    Error::validation(
                        "invoice_price_tolerance_percent",
                        "invoice_price_tolerance_percent must be a percent such as 2.",
                    )
                })?),
            },
        })
    }
}

#[derive(Template)]
#[template(path = "console/settings.html")]
struct SettingsPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    can_write: bool,
    f: SettingsForm,
    updated: String,
}

impl SettingsPage {
    /// The message of `field`, if the last save was refused for it.
    fn error_of(&self, field: &str) -> Option<&str> {
        self.notice.for_field(field)
    }
}

async fn show_settings(
    state: &AppState,
    staff: &Staff,
    notice: Notice,
    sent: Option<SettingsForm>,
    code: StatusCode,
) -> Outcome {
    let client = state.pool.get().await?;
    let stored = settings::read(&client, staff.caller.org_id).await?;
    let updated = stored
        .updated_at
        .map_or_else(|| "never changed (the defaults apply)".to_owned(), when);
    html_status(
        code,
        &SettingsPage {
            chrome: Some(Chrome::new(staff, "/console/settings")),
            csrf: staff.csrf.clone(),
            notice,
            can_write: Action::WriteSettings.permits(staff.role()),
            f: sent.unwrap_or_else(|| SettingsForm::of(&stored)),
            updated,
        },
    )
}

async fn settings_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<DoneQuery>,
) -> Outcome {
    let notice = match q.done.as_deref() {
        Some("saved") => Notice::done("The settings were saved."),
        _ => Notice::default(),
    };
    show_settings(&state, &staff, notice, None, StatusCode::OK).await
}

async fn save_settings(state: web::Data<AppState>, posted: Posted<SettingsForm>) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::WriteSettings)?;
    let attempt = async {
        let body = form.write()?;
        settings_write::change(&state.pool, &staff.caller.acting(), body).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other("/console/settings?done=saved")),
        Err(e @ Error::Validation { .. }) => {
            let code = actix_web::ResponseError::status_code(&e);
            show_settings(&state, &staff, Notice::from_error(&e), Some(form), code).await
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_that_is_not_one_is_refused_by_its_field() {
        let f = SettingsForm {
            tax_rate: "0.18".to_owned(),
            rate_staleness_days: "seven".to_owned(),
            default_low_stock_threshold: "10".to_owned(),
            default_copies: "1".to_owned(),
            ..SettingsForm::default()
        };
        let e = f.write().err().unwrap();
        assert!(
            matches!(e, Error::Validation { field: Some(n), .. } if n == "rate_staleness_days")
        );
    }

    #[test]
    fn blank_text_clears_and_unticked_boxes_are_off() {
        let f = SettingsForm {
            tax_rate: "0.18".to_owned(),
            rate_staleness_days: "7".to_owned(),
            default_low_stock_threshold: "10".to_owned(),
            default_copies: "1".to_owned(),
            legal_name: "  ".to_owned(),
            phone: "0700".to_owned(),
            tax_enabled: Some("on".to_owned()),
            ..SettingsForm::default()
        };
        let w = f.write().unwrap();
        assert_eq!(w.legal_name, Some(None));
        assert_eq!(w.phone, Some(Some("0700".to_owned())));
        assert_eq!(w.tax_enabled, Some(Flag(true)));
        assert_eq!(w.auto_print_receipt, Some(Flag(false)));
    }
}
