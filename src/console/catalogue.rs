//! The catalogue: search by name, generic name or barcode (a scanner's
//! code typed into the box is read as the API's `/scan` reads it, GS1
//! element strings included), paged; a medicine's page with every spec
//! field and its packs; create, edit and deactivate. Reads and writes call
//! the same domain functions as `/medicines` and `/medicines/{id}/packs`.
//!
//! Over 600 lines: the list, the medicine form (every spec field) and the
//! pack forms share their form types and refusal handling, kept together.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use serde::Deserialize;
use uuid::Uuid;

use super::forms::{self, base_of, ticked, Choice, Field, Form, Pager};
use super::{html_status, money, see_other, Chrome, NoFields, Notice, Outcome, Posted, Staff};
use crate::state::AppState;
use domain::input::{path_id, Flag};
use domain::medicines::{self, committed, MedicineView, MedicineWrite};
use domain::packs::{self, Pack, PackWrite};
use domain::paging::PageParams;
use domain::{scan, Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/medicines", web::get().to(list_page))
        .route("/medicines", web::post().to(create))
        .route("/medicines/new", web::get().to(new_page))
        .route("/medicines/{id}", web::get().to(medicine_page))
        .route("/medicines/{id}", web::post().to(edit))
        .route("/medicines/{id}/deactivate", web::post().to(deactivate))
        .route("/medicines/{id}/packs", web::post().to(add_pack))
        .route("/medicines/{id}/packs/{pack}", web::post().to(edit_pack))
        .route(
            "/medicines/{id}/packs/{pack}/remove",
            web::post().to(remove_pack),
        );
}

const PAGE_SIZE: i64 = 20;

pub struct MedicineRow {
    pub id: String,
    pub name: String,
    pub generic_name: String,
    pub codes: String,
    pub form: String,
    pub price: String,
    pub stock: i64,
    pub prescription: bool,
}

impl MedicineRow {
    fn of(m: &MedicineView) -> MedicineRow {
        let codes = [m.barcode.as_str(), m.gtin.as_deref().unwrap_or_default()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" · ");
        MedicineRow {
            id: m.id.to_string(),
            name: m.name.clone(),
            generic_name: m.generic_name.clone(),
            codes,
            form: [m.form.as_str(), m.strength.as_str()]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" "),
            price: money(m.selling_price),
            stock: m.stock_quantity,
            prescription: m.requires_prescription,
        }
    }
}

#[derive(Template)]
#[template(path = "console/medicines.html")]
struct ListPage {
    chrome: Option<Chrome>,
    notice: Notice,
    search: String,
    search_error: Option<String>,
    /// What a scanned code named, in words.
    scanned: Option<String>,
    rows: Vec<MedicineRow>,
    pager: Pager,
    can_write: bool,
}

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    pub search: Option<String>,
    pub category: Option<String>,
    pub page: Option<i64>,
    pub done: Option<String>,
}

/// Whether the search text is a scanner's code rather than words: a GS1
/// symbology mark, parenthesised application identifiers, a group
/// separator, or only digits (a GTIN or an in-house code).
fn looks_scanned(text: &str) -> bool {
    text.starts_with(']')
        || text.starts_with("(01)")
        || text.contains('\u{1d}')
        || (text.len() >= 8 && text.bytes().all(|b| b.is_ascii_digit()))
}

async fn list_page(state: web::Data<AppState>, staff: Staff, q: web::Query<ListQuery>) -> Outcome {
    let page = PageParams {
        page: q.page,
        page_size: Some(PAGE_SIZE),
    }
    .resolve(PAGE_SIZE)?;
    let search = q.search.clone().unwrap_or_default().trim().to_owned();
    let scope = staff.caller.branch_filter(None)?;
    let client = state.pool.get().await?;
    let mut scanned = None;
    let mut search_error = None;
    let mut found = None;
    if looks_scanned(&search) {
        match scan::name(&client, &search, "search").await {
            Ok(named) => {
                let m = medicines::get(&client, named.medicine_id, scope).await?;
                if let Some(m) = m {
                    let mut words = format!("The code names {}", m.name);
                    if let Some(p) = named.pack_id {
                        if let Some(p) = packs::get(&client, m.id, p).await? {
                            words.push_str(&format!(", {} of {}", p.name, p.units));
                        }
                    }
                    if let Some(b) = &named.batch_number {
                        words.push_str(&format!(", batch {b}"));
                    }
                    if let Some(e) = named.expiry {
                        words.push_str(&format!(", expiring {e}"));
                    }
                    words.push('.');
                    scanned = Some(words);
                    found = Some(vec![m.view()]);
                }
            }
            // A code of digits only may still be part of a name or a
            // barcode: the words search below has the last say.
            Err(e) if search.bytes().all(|b| b.is_ascii_digit()) => {
                search_error = Some(super::plain(&e.to_string()));
            }
            Err(e @ (Error::Validation { .. } | Error::Coded { .. })) => {
                search_error = Some(super::plain(&e.to_string()));
                found = Some(Vec::new());
            }
            Err(e) => return Err(e.into()),
        }
    }
    let (rows, total) = match found {
        Some(items) => {
            let n = items.len() as i64;
            (items, n)
        }
        None => {
            let filter = medicines::ListFilter {
                search: (!search.is_empty()).then(|| search.clone()),
                category: q.category.clone().filter(|c| !c.trim().is_empty()),
                branch_id: scope,
            };
            let (items, total) = medicines::list(&client, &filter, page).await?;
            if total > 0 {
                search_error = None;
            }
            (items.iter().map(|m| m.view()).collect(), total)
        }
    };
    let notice = match q.done.as_deref() {
        Some("removed") => Notice::done("The medicine was deactivated: it left the catalogue."),
        _ => Notice::default(),
    };
    let base = base_of(
        "/console/medicines",
        &[
            ("search", search.as_str()),
            ("category", q.category.as_deref().unwrap_or_default()),
        ],
    );
    html_status(
        StatusCode::OK,
        &ListPage {
            chrome: Some(Chrome::new(&staff, "/console/medicines")),
            notice,
            search,
            search_error,
            scanned,
            rows: rows.iter().map(MedicineRow::of).collect(),
            pager: Pager::new(&base, page, total),
            can_write: Action::WriteCatalogue.permits(staff.role()),
        },
    )
}

/// The medicine form's fields as text, as stored or as sent.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct MedicineForm {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub generic_name: String,
    #[serde(default)]
    pub barcode: String,
    #[serde(default)]
    pub gtin: String,
    #[serde(default)]
    pub category: String,
    #[serde(default)]
    pub form: String,
    #[serde(default)]
    pub strength: String,
    #[serde(default)]
    pub unit: String,
    #[serde(default)]
    pub selling_price: String,
    #[serde(default)]
    pub max_public_price: String,
    #[serde(default)]
    pub low_stock_threshold: String,
    pub requires_prescription: Option<String>,
    pub is_controlled: Option<String>,
    #[serde(default)]
    pub control_schedule: String,
    #[serde(default)]
    pub vat_category: String,
    pub requires_cold_chain: Option<String>,
    #[serde(default)]
    pub regulator_registration_no: String,
}

fn on(b: bool) -> Option<String> {
    b.then(|| "on".to_owned())
}

impl MedicineForm {
    fn of(m: &MedicineView) -> MedicineForm {
        MedicineForm {
            name: m.name.clone(),
            generic_name: m.generic_name.clone(),
            barcode: m.barcode.clone(),
            gtin: m.gtin.clone().unwrap_or_default(),
            category: m.category.clone(),
            form: m.form.clone(),
            strength: m.strength.clone(),
            unit: m.unit.clone(),
            selling_price: m.selling_price.normalize().to_string(),
            max_public_price: if m.max_public_price.is_zero() {
                String::new()
            } else {
                m.max_public_price.normalize().to_string()
            },
            low_stock_threshold: m.low_stock_threshold.to_string(),
            requires_prescription: on(m.requires_prescription),
            is_controlled: on(m.is_controlled),
            control_schedule: m.control_schedule.clone(),
            vat_category: m.vat_category.clone(),
            requires_cold_chain: on(m.requires_cold_chain),
            regulator_registration_no: m.regulator_registration_no.clone(),
        }
    }

    fn fields(&self) -> Vec<Field> {
        let vat = ["standard", "zero", "exempt"]
            .into_iter()
            .map(|v| {
                let current = if self.vat_category.is_empty() {
                    "standard"
                } else {
                    self.vat_category.as_str()
                };
                Choice::new(v, v, current)
            })
            .collect();
        vec![
            Field::text("name", "Name", &self.name).required(),
            Field::text("generic_name", "Generic name", &self.generic_name),
            Field::text("barcode", "In-house barcode", &self.barcode)
                .hint("Any text; it is not read as a GTIN."),
            Field::text("gtin", "GTIN of one unit", &self.gtin)
                .hint("8, 12, 13 or 14 digits with a valid check digit; blank for none."),
            Field::text("category", "Category", &self.category)
                .hint("A new category is added on first use."),
            Field::text("form", "Form", &self.form).hint("tablet, syrup, injection …"),
            Field::text("strength", "Strength", &self.strength),
            Field::text("unit", "Base unit", &self.unit)
                .hint("What stock counts: tablet, bottle …"),
            Field::number(
                "selling_price",
                "Selling price of one unit",
                &self.selling_price,
            )
            .required(),
            Field::number(
                "max_public_price",
                "Maximum public price",
                &self.max_public_price,
            )
            .hint("Blank: no ceiling is filed."),
            Field::whole(
                "low_stock_threshold",
                "Low-stock threshold",
                &self.low_stock_threshold,
            )
            .hint("Blank on a new medicine: the settings' default."),
            Field::select("vat_category", "VAT category", vat),
            Field::check(
                "requires_prescription",
                "Sold on prescription only",
                ticked(&self.requires_prescription),
            ),
            Field::check(
                "is_controlled",
                "Controlled drug",
                ticked(&self.is_controlled),
            ),
            Field::text(
                "control_schedule",
                "Control schedule",
                &self.control_schedule,
            ),
            Field::check(
                "requires_cold_chain",
                "Needs the cold chain",
                ticked(&self.requires_cold_chain),
            ),
            Field::text(
                "regulator_registration_no",
                "Regulator's registration number",
                &self.regulator_registration_no,
            ),
        ]
    }

    /// The API's write of this form: on a create, blank fields are left
    /// to their defaults; on an edit, every field is sent (blank clears).
    fn write(&self, create: bool) -> Result<MedicineWrite, Error> {
        let text = |v: &str| {
            if create && v.trim().is_empty() {
                None
            } else {
                Some(v.to_owned())
            }
        };
        let selling_price = forms::required_decimal("selling_price", &self.selling_price)?;
        let max_public_price = forms::decimal("max_public_price", &self.max_public_price)?;
        let threshold = forms::whole("low_stock_threshold", &self.low_stock_threshold)?;
        Ok(MedicineWrite {
            name: Some(self.name.clone()),
            generic_name: text(&self.generic_name),
            barcode: text(&self.barcode),
            gtin: text(&self.gtin),
            category: text(&self.category),
            form: text(&self.form),
            strength: text(&self.strength),
            unit: text(&self.unit),
            selling_price: Some(selling_price),
            max_public_price: if create {
                max_public_price
            } else {
                Some(max_public_price.unwrap_or_default())
            },
            low_stock_threshold: threshold.map(rust_decimal::Decimal::from),
            requires_prescription: Some(Flag(ticked(&self.requires_prescription))),
            is_controlled: Some(Flag(ticked(&self.is_controlled))),
            control_schedule: text(&self.control_schedule),
            vat_category: Some(if self.vat_category.trim().is_empty() {
                "standard".to_owned()
            } else {
                self.vat_category.clone()
            }),
            requires_cold_chain: Some(Flag(ticked(&self.requires_cold_chain))),
            regulator_registration_no: text(&self.regulator_registration_no),
            image_key: None,
            image_url: None,
            is_active: None,
        })
    }
}

#[derive(Template)]
#[template(path = "console/medicine_new.html")]
struct NewPage {
    chrome: Option<Chrome>,
    csrf: String,
    form: Form,
}

async fn new_page(staff: Staff) -> Outcome {
    staff.caller.require(Action::WriteCatalogue)?;
    show_new(
        &staff,
        MedicineForm::default(),
        Notice::default(),
        StatusCode::OK,
    )
}

fn show_new(staff: &Staff, sent: MedicineForm, notice: Notice, code: StatusCode) -> Outcome {
    html_status(
        code,
        &NewPage {
            chrome: Some(Chrome::new(staff, "/console/medicines")),
            csrf: staff.csrf.clone(),
            form: Form::new(sent.fields(), &notice),
        },
    )
}

/// A refusal in words on the form again; a fault as an error page.
fn refused(e: Error) -> Result<(Notice, StatusCode), super::Failure> {
    match e {
        e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_)) => {
            let code = actix_web::ResponseError::status_code(&e);
            Ok((Notice::from_error(&e), code))
        }
        e => Err(e.into()),
    }
}

async fn create(state: web::Data<AppState>, posted: Posted<MedicineForm>) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::WriteCatalogue)?;
    let attempt = async {
        let body = form.write(true)?;
        committed::create(&state.pool, body).await
    };
    match attempt.await {
        Ok(m) => Ok(see_other(&format!(
            "/console/medicines/{}?done=created",
            m.id
        ))),
        Err(e) => {
            let (notice, code) = refused(e)?;
            show_new(&staff, form, notice, code)
        }
    }
}

pub struct PackRow {
    pub id: String,
    pub name: String,
    pub units: i32,
    pub gtin: String,
    pub price: String,
    pub own_price: String,
    pub sellable: bool,
    pub active: bool,
}

#[derive(Template)]
#[template(path = "console/medicine.html")]
struct MedicinePage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    id: String,
    name: String,
    stock: i64,
    stock_scope: &'static str,
    can_write: bool,
    can_packs: bool,
    form: Form,
    packs: Vec<PackRow>,
    pack_form: Form,
}

#[derive(Debug, Default, Deserialize)]
pub struct DoneQuery {
    pub done: Option<String>,
}

/// The pack form's fields as text.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct PackForm {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub units: String,
    #[serde(default)]
    pub gtin: String,
    #[serde(default)]
    pub selling_price: String,
    pub is_sellable: Option<String>,
}

impl PackForm {
    fn fields(&self, prefix: &str) -> Vec<Field> {
        vec![
            Field::text("name", "Pack name", &self.name)
                .required()
                .hint("strip, box …")
                .prefixed(prefix),
            Field::whole("units", "Units in the pack", &self.units)
                .required()
                .hint("At least 2 base units.")
                .prefixed(prefix),
            Field::text("gtin", "Pack GTIN", &self.gtin)
                .hint("Blank for none.")
                .prefixed(prefix),
            Field::number("selling_price", "Pack price", &self.selling_price)
                .hint("Blank: units × the unit price.")
                .prefixed(prefix),
            Field::check(
                "is_sellable",
                "Sold in this pack",
                ticked(&self.is_sellable),
            )
            .prefixed(prefix),
        ]
    }

    fn write(&self) -> Result<PackWrite, Error> {
        let units = forms::whole("units", &self.units)?
            .ok_or_else(|| Error::validation("units", "Enter the units in the pack."))?;
        Ok(PackWrite {
            name: Some(self.name.clone()),
            units: Some(serde_json::Number::from(units)),
            gtin: Some(self.gtin.clone()),
            selling_price: Some(forms::decimal("selling_price", &self.selling_price)?),
            is_sellable: Some(Flag(ticked(&self.is_sellable))),
            is_active: None,
        })
    }
}

fn pack_row(p: &Pack, unit_price: rust_decimal::Decimal) -> PackRow {
    PackRow {
        id: p.id.to_string(),
        name: p.name.clone(),
        units: p.units,
        gtin: p.gtin.clone().unwrap_or_default(),
        price: money(p.price(unit_price)),
        own_price: p
            .selling_price
            .map(|d| d.normalize().to_string())
            .unwrap_or_default(),
        sellable: p.is_sellable,
        active: p.is_active,
    }
}

async fn show_medicine(
    state: &AppState,
    staff: &Staff,
    id: Uuid,
    notice: Notice,
    sent: Option<MedicineForm>,
    pack_sent: Option<PackForm>,
    code: StatusCode,
) -> Outcome {
    let scope = staff.caller.branch_filter(None)?;
    let client = state.pool.get().await?;
    let m = packs::medicine_with_packs(&client, id, scope)
        .await?
        .ok_or_else(|| Error::not_found("Medicine not found (or it was deactivated)."))?;
    let all_packs = packs::list(&client, id, false).await?;
    let (form, pack_form) = match (&sent, &pack_sent) {
        (Some(f), _) => (
            Form::new(f.fields(), &notice),
            Form::plain(PackForm::default().fields("pack")),
        ),
        (None, Some(p)) => (
            Form::plain(MedicineForm::of(&m).fields()),
            Form::new(p.fields("pack"), &notice),
        ),
        (None, None) => (
            Form::plain(MedicineForm::of(&m).fields()),
            Form::plain(
                PackForm {
                    is_sellable: Some("on".to_owned()),
                    ..PackForm::default()
                }
                .fields("pack"),
            ),
        ),
    };
    let notice = if sent.is_some() || pack_sent.is_some() {
        // The error is beside its field (or above its form).
        Notice::default()
    } else {
        notice
    };
    html_status(
        code,
        &MedicinePage {
            chrome: Some(Chrome::new(staff, "/console/medicines")),
            csrf: staff.csrf.clone(),
            notice,
            id: m.id.to_string(),
            name: m.name.clone(),
            stock: m.stock_quantity,
            stock_scope: if scope.is_some() {
                "at your branch"
            } else {
                "across the chain"
            },
            can_write: Action::WriteCatalogue.permits(staff.role()),
            can_packs: Action::ManagePacks.permits(staff.role()),
            form,
            packs: all_packs
                .iter()
                .map(|p| pack_row(p, m.selling_price))
                .collect(),
            pack_form,
        },
    )
}

fn done_notice(done: Option<&str>) -> Notice {
    match done {
        Some("created") => Notice::done("The medicine was added to the catalogue."),
        Some("saved") => Notice::done("The medicine was saved."),
        Some("pack-added") => Notice::done("The pack was added."),
        Some("pack-saved") => Notice::done("The pack was saved."),
        Some("pack-removed") => Notice::done("The pack was removed."),
        _ => Notice::default(),
    }
}

async fn medicine_page(
    state: web::Data<AppState>,
    staff: Staff,
    id: web::Path<String>,
    q: web::Query<DoneQuery>,
) -> Outcome {
    let id = path_id(&id, "Medicine")?;
    let notice = done_notice(q.done.as_deref());
    show_medicine(&state, &staff, id, notice, None, None, StatusCode::OK).await
}

async fn edit(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<MedicineForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::WriteCatalogue)?;
    let id = path_id(&id, "Medicine")?;
    let attempt = async {
        let body = form.write(false)?;
        committed::edit(&state.pool, id, body, staff.caller.user_id).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other(&format!("/console/medicines/{id}?done=saved"))),
        Err(e) => {
            let (notice, code) = refused(e)?;
            show_medicine(&state, &staff, id, notice, Some(form), None, code).await
        }
    }
}

async fn deactivate(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<NoFields>,
) -> Outcome {
    posted.staff.caller.require(Action::WriteCatalogue)?;
    let id = path_id(&id, "Medicine")?;
    committed::remove(&state.pool, id).await?;
    Ok(see_other("/console/medicines?done=removed"))
}

async fn add_pack(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<PackForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ManagePacks)?;
    let id = path_id(&id, "Medicine")?;
    let attempt = async {
        let body = form.write()?;
        packs::create(&state.pool, id, body).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other(&format!(
            "/console/medicines/{id}?done=pack-added#packs"
        ))),
        Err(e) => {
            let (notice, code) = refused(e)?;
            show_medicine(&state, &staff, id, notice, None, Some(form), code).await
        }
    }
}

async fn edit_pack(
    state: web::Data<AppState>,
    ids: web::Path<(String, String)>,
    posted: Posted<PackForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ManagePacks)?;
    let (id, pack) = (path_id(&ids.0, "Medicine")?, path_id(&ids.1, "Pack")?);
    let attempt = async {
        let body = form.write()?;
        packs::update(&state.pool, id, pack, body).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other(&format!(
            "/console/medicines/{id}?done=pack-saved#packs"
        ))),
        Err(e) => {
            // Shown above the packs: the add form is another pack's.
            let (notice, code) = refused(e)?;
            let notice = Notice {
                field: None,
                ..notice
            };
            show_medicine(&state, &staff, id, notice, None, None, code).await
        }
    }
}

async fn remove_pack(
    state: web::Data<AppState>,
    ids: web::Path<(String, String)>,
    posted: Posted<NoFields>,
) -> Outcome {
    posted.staff.caller.require(Action::ManagePacks)?;
    let (id, pack) = (path_id(&ids.0, "Medicine")?, path_id(&ids.1, "Pack")?);
    packs::delete(&state.pool, id, pack).await?;
    Ok(see_other(&format!(
        "/console/medicines/{id}?done=pack-removed#packs"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scanner_codes_are_told_from_words() {
        assert!(looks_scanned("]d2010614141000041510ABC"));
        assert!(looks_scanned("(01)06141410000041(10)ABC"));
        assert!(looks_scanned("06141410000041"));
        assert!(!looks_scanned("Paracetamol"));
        assert!(!looks_scanned("500"));
    }

    #[test]
    fn a_price_that_is_not_a_number_is_refused_by_its_field() {
        let f = MedicineForm {
            name: "X".to_owned(),
            selling_price: "ten".to_owned(),
            ..MedicineForm::default()
        };
        let e = f.write(true).err().unwrap();
        assert!(matches!(e, Error::Validation { field: Some(n), .. } if n == "selling_price"));
    }
}
