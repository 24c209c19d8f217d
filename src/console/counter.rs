//! The counter: selling at the browser. A scanner in keyboard mode types
//! its code into the scan box and presses Enter (the form's first button
//! adds the line), so no configuration is needed; words search the
//! catalogue and offer the medicines found. The lines travel with the form
//! (no server-side basket), each re-read from the catalogue on every
//! render, and the sale is the same `SaleRequest` the API takes, checked by
//! its `validate` and handed to the branch's sale desk exactly as
//! `POST /sales` hands it. The sale's receipt page shows the FDN and QR
//! payload, or "fiscal document pending".
//!
//! Selling needs an open cash session at the branch (the till's drawer the
//! cash goes into); the page opens one with the API's `OpenSession`.
//!
//! Over 600 lines: the counter form, its scan-box lookup (shared with the
//! count and transfer pages), the sale and the receipt page share the line
//! and refusal handling, kept together.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use rust_decimal::Decimal;
use serde::Deserialize;
use uuid::Uuid;

use super::forms::{self, Choice};
use super::{
    branch_options, html, html_status, money, optional_id, see_other, when, BranchOption, Chrome,
    Notice, Outcome, Posted, Staff,
};
use crate::state::AppState;
use domain::cash_sessions::{self, OpenSession};
use domain::input::path_id;
use domain::medicines::{self, MedicineView};
use domain::packs;
use domain::paging::Page;
use domain::printing::receipt::{self, Receipt};
use domain::sales::{self, SaleLineRequest, SaleRequest};
use domain::{customers, prescriptions, scan, Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/counter", web::get().to(counter_page))
        .route("/counter", web::post().to(work))
        .route("/counter/session", web::post().to(open_session))
        .route("/counter/receipts/{id}", web::get().to(receipt_page));
}

/// The fields the page shows a refusal beside.
const PLACED: [&str; 7] = [
    "code",
    "customer",
    "customer_id",
    "coupon_code",
    "prescription_id",
    "payment_method",
    "opening_float",
];

/// How many medicines a words search offers.
const CHOICES: i64 = 10;

/// A line as the form carries it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SentLine {
    pub medicine_id: String,
    pub pack_id: String,
    pub scan: String,
    pub quantity: String,
}

/// The counter form: the lines, the scan box and the sale's choices.
#[derive(Debug, Clone, Default)]
pub struct CounterForm {
    pub lines: Vec<SentLine>,
    pub code: String,
    pub quantity: String,
    pub payment_method: String,
    pub customer: String,
    pub coupon_code: String,
    pub prescription_id: String,
    pub branch_id: String,
    pub mutation_id: String,
    pub op: String,
}

impl CounterForm {
    /// Reads the pairs: `line-<n>-<field>` per line, in `n` order.
    fn of(pairs: Vec<(String, String)>) -> CounterForm {
        let mut f = CounterForm::default();
        let mut lines: std::collections::BTreeMap<usize, SentLine> = Default::default();
        for (k, v) in pairs {
            match k.as_str() {
                "code" => f.code = v,
                "quantity" => f.quantity = v,
                "payment_method" => f.payment_method = v,
                "customer" => f.customer = v,
                "coupon_code" => f.coupon_code = v,
                "prescription_id" => f.prescription_id = v,
                "branch_id" => f.branch_id = v,
                "client_mutation_id" => f.mutation_id = v,
                "op" => f.op = v,
                other => {
                    let Some((n, field)) = other
                        .strip_prefix("line-")
                        .and_then(|r| r.split_once('-'))
                        .and_then(|(n, field)| Some((n.parse::<usize>().ok()?, field)))
                    else {
                        continue;
                    };
                    let line = lines.entry(n).or_default();
                    match field {
                        "medicine" => line.medicine_id = v,
                        "pack" => line.pack_id = v,
                        "scan" => line.scan = v,
                        "quantity" => line.quantity = v,
                        _ => {}
                    }
                }
            }
        }
        f.lines = lines.into_values().collect();
        f
    }

    /// The API's body for these lines and choices (shape errors name the
    /// field the page shows them beside).
    fn request(&self, customer_id: Option<Uuid>, branch_id: Uuid) -> Result<SaleRequest, Error> {
        let mut items = Vec::with_capacity(self.lines.len());
        for (i, l) in self.lines.iter().enumerate() {
            let field = format!("items[{i}].quantity");
            let quantity = forms::required_decimal(&field, &l.quantity)
                .map_err(|_| Error::validation(field.clone(), "Enter how many, a whole number."))?;
            items.push(SaleLineRequest {
                medicine_id: Some(line_id(&l.medicine_id, &format!("items[{i}].medicine_id"))?),
                pack_id: optional_id(&format!("items[{i}].pack_id"), Some(&l.pack_id))?,
                scan: Some(l.scan.clone()).filter(|s| !s.trim().is_empty()),
                quantity,
                unit_price: None,
            });
        }
        Ok(SaleRequest {
            items,
            payment_method: self.payment_method.clone(),
            customer_id,
            prescription_id: optional_id("prescription_id", Some(&self.prescription_id))?,
            coupon_code: Some(self.coupon_code.clone()).filter(|c| !c.trim().is_empty()),
            client_mutation_id: Some(self.mutation_id.clone()).filter(|m| !m.is_empty()),
            branch_id: Some(branch_id),
        })
    }
}

fn line_id(raw: &str, field: &str) -> Result<Uuid, Error> {
    Uuid::parse_str(raw.trim())
        .map_err(|_| Error::validation(field, "This line no longer names a medicine."))
}

/// Whether the scan box holds a scanner's code rather than words (as the
/// catalogue's search tells them apart).
pub fn looks_scanned(text: &str) -> bool {
    text.starts_with(']')
        || text.starts_with("(01)")
        || text.contains('\u{1d}')
        || (text.len() >= 8 && text.bytes().all(|b| b.is_ascii_digit()))
}

/// A line as the page shows it.
pub struct LineRow {
    pub n: usize,
    pub medicine_id: String,
    pub pack_id: String,
    pub scan: String,
    pub quantity: String,
    pub name: String,
    pub sold_by: String,
    pub price: String,
    pub total: String,
    pub prescription: bool,
    pub error: Option<String>,
}

/// A medicine a words search found, to add with one button.
pub struct Offer {
    pub value: String,
    pub label: String,
}

#[derive(Template)]
#[template(path = "console/counter.html")]
struct CounterPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    /// The refusal's words when no field of the page took them.
    page_error: Option<String>,
    branches: Vec<BranchOption>,
    session: Option<String>,
    can_open: bool,
    lines: Vec<LineRow>,
    offers: Vec<Offer>,
    estimate: String,
    code: String,
    code_error: Option<String>,
    quantity: String,
    methods: Vec<Choice>,
    customer: String,
    coupon_code: String,
    prescriptions: Vec<Choice>,
    mutation_id: String,
}

/// The branch the counter sells at: the staff member's, or for those who
/// work on any branch the one chosen.
fn branch_of(staff: &Staff, sent: &str) -> Result<Uuid, Error> {
    let requested = optional_id("branch_id", Some(sent))?;
    staff.caller.branch_scope(requested)
}

async fn show(
    state: &AppState,
    staff: &Staff,
    form: &CounterForm,
    offers: Vec<Offer>,
    notice: Notice,
    code: StatusCode,
) -> Outcome {
    let branch_id = branch_of(staff, &form.branch_id)?;
    let client = state.pool.get().await?;
    let session = cash_sessions::current(&client, branch_id).await?;
    let mut lines = Vec::with_capacity(form.lines.len());
    let mut estimate = Decimal::ZERO;
    for (n, l) in form.lines.iter().enumerate() {
        let Ok(medicine_id) = Uuid::parse_str(&l.medicine_id) else {
            continue;
        };
        let Some(m) = medicines::get(&client, medicine_id, Some(branch_id)).await? else {
            continue;
        };
        let m = m.view();
        let pack = match Uuid::parse_str(&l.pack_id) {
            Ok(p) => packs::get(&client, medicine_id, p).await?,
            Err(_) => None,
        };
        let (sold_by, price) = match &pack {
            Some(p) => (
                format!("{} of {}", p.name, p.units),
                p.selling_price
                    .unwrap_or(m.selling_price * Decimal::from(p.units)),
            ),
            None => ("unit".to_owned(), m.selling_price),
        };
        let qty = l.quantity.trim().parse::<Decimal>().unwrap_or_default();
        estimate += price * qty;
        let field = format!("items[{n}].quantity");
        let error = [
            field.as_str(),
            &format!("items[{n}].medicine_id"),
            &format!("items[{n}].pack_id"),
            &format!("items[{n}].scan"),
        ]
        .iter()
        .find_map(|f| notice.for_field(f).map(str::to_owned));
        lines.push(LineRow {
            n,
            medicine_id: l.medicine_id.clone(),
            pack_id: l.pack_id.clone(),
            scan: l.scan.clone(),
            quantity: l.quantity.clone(),
            name: m.name.clone(),
            sold_by,
            price: money(price),
            total: money(price * qty),
            prescription: m.requires_prescription || m.is_controlled,
            error,
        });
    }
    let method = if form.payment_method.is_empty() {
        "cash"
    } else {
        form.payment_method.as_str()
    };
    let methods = [
        ("cash", "Cash"),
        ("card", "Card"),
        ("mobile_money", "Mobile money"),
        ("credit", "On the customer's account"),
    ]
    .into_iter()
    .map(|(v, l)| Choice::new(v, l, method))
    .collect();
    let (pending, _) = prescriptions::list(
        &client,
        branch_id,
        Some("pending"),
        Page {
            page: 1,
            page_size: 100,
        },
    )
    .await?;
    let mut rx = vec![Choice::new("", "None", &form.prescription_id)];
    rx.extend(pending.iter().map(|p| {
        Choice::new(
            p.id.to_string(),
            format!("{} for {}", p.rx_number, p.patient_name),
            &form.prescription_id,
        )
    }));
    let on_a_line = lines.iter().any(|l| l.error.is_some());
    let page_error = match notice.field.as_deref() {
        _ if on_a_line => None,
        Some(f) if PLACED.contains(&f) => None,
        _ => notice.error.clone(),
    };
    let chosen_branch = staff.caller.any_branch().then_some(branch_id);
    let mut branches = branch_options(&client, staff, chosen_branch).await?;
    // The counter sells at one branch: no "All branches".
    branches.retain(|b| !b.id.is_empty());
    html_status(
        code,
        &CounterPage {
            chrome: Some(Chrome::new(staff, "/console/counter")),
            csrf: staff.csrf.clone(),
            code_error: notice.for_field("code").map(str::to_owned),
            page_error,
            notice,
            branches,
            session: session.map(|s| format!("opened {}", when(s.opened_at))),
            can_open: Action::OpenCloseCashSession.permits(staff.role()),
            lines,
            offers,
            estimate: money(estimate),
            code: form.code.clone(),
            quantity: if form.quantity.trim().is_empty() {
                "1".to_owned()
            } else {
                form.quantity.clone()
            },
            methods,
            customer: form.customer.clone(),
            coupon_code: form.coupon_code.clone(),
            prescriptions: rx,
            mutation_id: if form.mutation_id.is_empty() {
                Uuid::now_v7().to_string()
            } else {
                form.mutation_id.clone()
            },
        },
    )
}

#[derive(Debug, Default, Deserialize)]
pub struct CounterQuery {
    pub branch_id: Option<String>,
    pub done: Option<String>,
}

async fn counter_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<CounterQuery>,
) -> Outcome {
    staff.caller.require(Action::Sell)?;
    let form = CounterForm {
        branch_id: q.branch_id.clone().unwrap_or_default(),
        ..CounterForm::default()
    };
    let notice = match q.done.as_deref() {
        Some("session") => Notice::done("The cash session is open: you can sell."),
        _ => Notice::default(),
    };
    show(&state, &staff, &form, Vec::new(), notice, StatusCode::OK).await
}

/// What a scan box's text names.
pub enum Found {
    /// A scanner's code, read as a sale line's `scan` is.
    Scanned(scan::Named),
    /// Words matching one medicine.
    One(Box<MedicineView>),
    /// Words matching several (at most `CHOICES`).
    Many(Vec<MedicineView>),
}

/// Reads a scan box: a code when it looks like one (digits alone that
/// name nothing are searched as words), otherwise words searching the
/// branch's catalogue; nothing found is a refusal naming `field`.
pub async fn lookup<C: deadpool_postgres::GenericClient + Sync>(
    client: &C,
    text: &str,
    branch_id: Uuid,
    field: &str,
) -> Result<Found, Error> {
    if looks_scanned(text) {
        match scan::name(client, text, field).await {
            Ok(named) => return Ok(Found::Scanned(named)),
            Err(_) if text.bytes().all(|b| b.is_ascii_digit()) => {}
            Err(e) => return Err(e),
        }
    }
    let filter = medicines::ListFilter {
        search: Some(text.to_owned()),
        category: None,
        branch_id: Some(branch_id),
    };
    let (mut found, _) = medicines::list(
        client,
        &filter,
        Page {
            page: 1,
            page_size: CHOICES,
        },
    )
    .await?;
    match found.len() {
        0 => Err(Error::validation(
            field,
            format!("Nothing in the catalogue matches {text}."),
        )),
        1 => Ok(Found::One(Box::new(found.remove(0).view()))),
        _ => Ok(Found::Many(found.iter().map(|m| m.view()).collect())),
    }
}

/// The scan box's code or words, read: the line to add, or the medicines
/// the words found to choose from.
async fn add(
    state: &AppState,
    form: &mut CounterForm,
    branch_id: Uuid,
) -> Result<Vec<Offer>, Error> {
    let text = form.code.trim().to_owned();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let quantity = match form.quantity.trim() {
        "" => "1".to_owned(),
        q => q.to_owned(),
    };
    let client = state.pool.get().await?;
    let mut offers = Vec::new();
    match lookup(&client, &text, branch_id, "code").await? {
        Found::Scanned(named) => {
            let line = SentLine {
                medicine_id: named.medicine_id.to_string(),
                pack_id: named.pack_id.map(|p| p.to_string()).unwrap_or_default(),
                scan: text.clone(),
                quantity: quantity.clone(),
            };
            // The same code again (no serial: one of many alike) is one
            // more of the line it made.
            let same = form.lines.iter_mut().find(|l| {
                named.serial.is_none() && l.scan == line.scan && l.medicine_id == line.medicine_id
            });
            match same {
                Some(l) => {
                    let had = l.quantity.trim().parse::<Decimal>().unwrap_or_default();
                    let more = quantity.parse::<Decimal>().unwrap_or(Decimal::ONE);
                    l.quantity = (had + more).to_string();
                }
                None => form.lines.push(line),
            }
        }
        Found::One(m) => form.lines.push(SentLine {
            medicine_id: m.id.to_string(),
            quantity,
            ..SentLine::default()
        }),
        Found::Many(many) => {
            for m in many {
                offers.push(Offer {
                    value: format!("pick:{}:", m.id),
                    label: format!(
                        "{} ({} in stock, {} each)",
                        m.name,
                        m.stock_quantity,
                        money(m.selling_price)
                    ),
                });
                for p in packs::list(&client, m.id, true).await? {
                    if p.is_sellable {
                        offers.push(Offer {
                            value: format!("pick:{}:{}", m.id, p.id),
                            label: format!("{}, {} of {}", m.name, p.name, p.units),
                        });
                    }
                }
            }
            return Ok(offers);
        }
    }
    form.code.clear();
    form.quantity.clear();
    Ok(offers)
}

/// One post of the counter form: add a line (the scan box, or a medicine
/// picked from a search), drop a line, or sell.
async fn work(state: web::Data<AppState>, posted: Posted<Vec<(String, String)>>) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::Sell)?;
    let mut form = CounterForm::of(form);
    let branch_id = branch_of(&staff, &form.branch_id)?;
    let op = form.op.clone();
    if let Some(rest) = op.strip_prefix("pick:") {
        let (m, p) = rest.split_once(':').unwrap_or((rest, ""));
        form.lines.push(SentLine {
            medicine_id: m.to_owned(),
            pack_id: p.to_owned(),
            scan: String::new(),
            quantity: match form.quantity.trim() {
                "" => "1".to_owned(),
                q => q.to_owned(),
            },
        });
        form.code.clear();
        form.quantity.clear();
        return show(
            &state,
            &staff,
            &form,
            Vec::new(),
            Notice::default(),
            StatusCode::OK,
        )
        .await;
    }
    if let Some(n) = op
        .strip_prefix("remove-")
        .and_then(|n| n.parse::<usize>().ok())
    {
        if n < form.lines.len() {
            form.lines.remove(n);
        }
        return show(
            &state,
            &staff,
            &form,
            Vec::new(),
            Notice::default(),
            StatusCode::OK,
        )
        .await;
    }
    if op != "sell" {
        return match add(&state, &mut form, branch_id).await {
            Ok(offers) => {
                show(
                    &state,
                    &staff,
                    &form,
                    offers,
                    Notice::default(),
                    StatusCode::OK,
                )
                .await
            }
            Err(e) => refused(&state, &staff, &form, e).await,
        };
    }
    match sell(&state, &staff, &form, branch_id).await {
        Ok(sale_id) => Ok(see_other(&format!("/console/counter/receipts/{sale_id}"))),
        Err(e) => refused(&state, &staff, &form, e).await,
    }
}

/// A refusal in words beside its field, the form kept; faults are pages.
async fn refused(state: &AppState, staff: &Staff, form: &CounterForm, e: Error) -> Outcome {
    match e {
        Error::Validation { .. }
        | Error::Coded { .. }
        | Error::Conflict(_)
        | Error::Forbidden(_)
        | Error::NotFound(_) => {
            let code = actix_web::ResponseError::status_code(&e);
            show(state, staff, form, Vec::new(), Notice::from_error(&e), code).await
        }
        other => Err(other.into()),
    }
}

/// The customer the words name (phone or name), exactly one.
async fn customer_of(state: &AppState, text: &str) -> Result<Option<Uuid>, Error> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let client = state.pool.get().await?;
    let (found, total) = customers::list(
        &client,
        Some(text),
        Page {
            page: 1,
            page_size: 2,
        },
    )
    .await?;
    match (found.as_slice(), total) {
        ([one], 1) => Ok(Some(one.id)),
        ([], _) => Err(Error::validation(
            "customer",
            format!("No customer matches {text}."),
        )),
        _ => Err(Error::validation(
            "customer",
            format!("Several customers match {text}: enter more of the phone number."),
        )),
    }
}

/// Makes the sale as `POST /sales` does: the same request checked by its
/// `validate`, handed to the branch's sale desk.
async fn sell(
    state: &AppState,
    staff: &Staff,
    form: &CounterForm,
    branch_id: Uuid,
) -> Result<Uuid, Error> {
    if form.lines.is_empty() {
        return Err(Error::validation(
            "code",
            "Scan or search a medicine first: the sale has no lines.",
        ));
    }
    {
        let client = state.pool.get().await?;
        if cash_sessions::current(&client, branch_id).await?.is_none() {
            return Err(Error::conflict(
                "No cash session is open at this branch: open one before selling.",
            ));
        }
    }
    let customer_id = customer_of(state, &form.customer).await?;
    let sale = form.request(customer_id, branch_id)?.validate(
        branch_id,
        staff.caller.user_id,
        staff.caller.role,
    )?;
    let outcome = state.sales.submit(&state.actors, branch_id, sale).await?;
    Ok(outcome.sale.id)
}

#[derive(Debug, Default, Deserialize)]
pub struct SessionForm {
    pub opening_float: String,
    pub branch_id: Option<String>,
}

/// Opens the branch's cash session as `POST /sessions/open` does.
async fn open_session(state: web::Data<AppState>, posted: Posted<SessionForm>) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::OpenCloseCashSession)?;
    let sent_branch = form.branch_id.clone().unwrap_or_default();
    let branch_id = branch_of(&staff, &sent_branch)?;
    let attempt = async {
        let float = forms::decimal("opening_float", &form.opening_float)?.unwrap_or_default();
        let opening_float = domain::input::amount("opening_float", float)?;
        state
            .actors
            .branch(
                branch_id,
                OpenSession {
                    branch_id,
                    user_id: staff.caller.user_id,
                    opening_float,
                },
            )
            .await
    };
    let back = CounterForm {
        branch_id: sent_branch.clone(),
        ..CounterForm::default()
    };
    match attempt.await {
        Ok(_) => Ok(see_other(&format!(
            "/console/counter?done=session&branch_id={sent_branch}"
        ))),
        Err(e) => refused(&state, &staff, &back, e).await,
    }
}

#[derive(Template)]
#[template(path = "console/counter_receipt.html")]
struct ReceiptPage {
    chrome: Option<Chrome>,
    r: Receipt,
    sale_id: String,
    issued: String,
}

impl ReceiptPage {
    fn amount(&self, d: &Decimal) -> String {
        money(*d)
    }
}

/// The sale's receipt, as `GET /sales/{id}/receipt` prints it.
async fn receipt_page(state: web::Data<AppState>, staff: Staff, id: web::Path<String>) -> Outcome {
    let id = path_id(&id, "Sale")?;
    let client = state.pool.get().await?;
    let sale = sales::get_shown(&client, id)
        .await?
        .filter(|s| staff.caller.can_see_branch(s.branch_id))
        .ok_or_else(|| Error::not_found("Sale not found"))?;
    let r = receipt::of_sale(&client, sale).await?;
    html(&ReceiptPage {
        chrome: Some(Chrome::new(&staff, "/console/counter")),
        issued: when(r.issued_at),
        sale_id: id.to_string(),
        r,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_keeps_its_lines_in_order() {
        let m = Uuid::now_v7();
        let f = CounterForm::of(vec![
            ("line-1-medicine".to_owned(), m.to_string()),
            ("line-1-quantity".to_owned(), "3".to_owned()),
            ("line-0-medicine".to_owned(), m.to_string()),
            ("line-0-scan".to_owned(), "06141410000041".to_owned()),
            ("line-0-quantity".to_owned(), "1".to_owned()),
            ("payment_method".to_owned(), "card".to_owned()),
        ]);
        assert_eq!(f.lines.len(), 2);
        assert_eq!(f.lines[0].scan, "06141410000041");
        assert_eq!(f.lines[1].quantity, "3");
        let r = f.request(None, Uuid::now_v7()).unwrap();
        assert_eq!(r.items.len(), 2);
        assert_eq!(r.items[1].quantity, Decimal::from(3));
        assert_eq!(r.payment_method, "card");
    }

    #[test]
    fn a_quantity_that_is_not_a_number_is_refused_beside_its_line() {
        let f = CounterForm::of(vec![
            ("line-0-medicine".to_owned(), Uuid::now_v7().to_string()),
            ("line-0-quantity".to_owned(), "two".to_owned()),
        ]);
        let e = f.request(None, Uuid::now_v7()).err().unwrap();
        assert!(
            matches!(e, Error::Validation { field: Some(ref f), .. } if f == "items[0].quantity")
        );
    }
}
