//! Stock counts: scan or pick the medicines on a shelf, enter what is
//! there, see each line's variance against the ledger, then post. Posting
//! is the branch actor's `SubmitCount` with the lines checked by the
//! API's `CountRequest::lines`, exactly as `POST /stockcount/submit`.
//! The lines travel with the form, re-read from the ledger on every
//! render, so the variance shown is the one posting would make.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use rust_decimal::Decimal;
use serde::Deserialize;
use uuid::Uuid;

use super::counter::{lookup, Found, Offer};
use super::forms;
use super::{
    branch_options, html_status, optional_id, see_other, BranchOption, Chrome, Notice, Outcome,
    Posted, Staff,
};
use crate::state::AppState;
use domain::medicines;
use domain::stock::count::{CountRequest, CountRequestItem, SubmitCount};
use domain::{Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/stock/count", web::get().to(count_page))
        .route("/stock/count", web::post().to(work));
}

/// A counted line as the form carries it.
#[derive(Debug, Clone, Default)]
pub struct SentLine {
    pub medicine_id: String,
    pub counted: String,
    pub notes: String,
}

#[derive(Debug, Clone, Default)]
pub struct CountForm {
    pub lines: Vec<SentLine>,
    pub code: String,
    pub branch_id: String,
    pub op: String,
}

impl CountForm {
    /// Reads `line-<n>-<field>` per line, in `n` order.
    fn of(pairs: Vec<(String, String)>) -> CountForm {
        let mut f = CountForm::default();
        let mut lines: std::collections::BTreeMap<usize, SentLine> = Default::default();
        for (k, v) in pairs {
            match k.as_str() {
                "code" => f.code = v,
                "branch_id" => f.branch_id = v,
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
                        "counted" => line.counted = v,
                        "notes" => line.notes = v,
                        _ => {}
                    }
                }
            }
        }
        f.lines = lines.into_values().collect();
        f
    }

    /// The API's body (a blank count is refused beside its line).
    fn request(&self) -> Result<CountRequest, Error> {
        let mut items = Vec::with_capacity(self.lines.len());
        for (i, l) in self.lines.iter().enumerate() {
            let field = format!("items[{i}].counted_quantity");
            let counted = forms::decimal(&field, &l.counted)
                .map_err(|_| Error::validation(field.clone(), "Enter the units counted."))?
                .ok_or_else(|| Error::validation(field.clone(), "Enter the units counted."))?;
            let medicine_id = Uuid::parse_str(l.medicine_id.trim()).map_err(|_| {
                Error::validation(
                    format!("items[{i}].medicine_id"),
                    "This line no longer names a medicine.",
                )
            })?;
            items.push(CountRequestItem {
                medicine_id,
                counted_quantity: counted,
                notes: Some(l.notes.clone()).filter(|n| !n.trim().is_empty()),
            });
        }
        Ok(CountRequest {
            items: Some(items),
            branch_id: None,
        })
    }
}

pub struct LineRow {
    pub n: usize,
    pub medicine_id: String,
    pub name: String,
    pub ledger: i64,
    pub counted: String,
    pub notes: String,
    /// Counted minus the ledger, once a count is entered.
    pub variance: Option<String>,
    pub differs: bool,
    pub error: Option<String>,
}

#[derive(Template)]
#[template(path = "console/stock_count.html")]
struct CountPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    page_error: Option<String>,
    code_error: Option<String>,
    branches: Vec<BranchOption>,
    code: String,
    offers: Vec<Offer>,
    lines: Vec<LineRow>,
    /// Every line counted and checked: posting is offered.
    ready: bool,
}

fn branch_of(staff: &Staff, sent: &str) -> Result<Uuid, Error> {
    staff
        .caller
        .branch_scope(optional_id("branch_id", Some(sent))?)
}

async fn show(
    state: &AppState,
    staff: &Staff,
    form: &CountForm,
    offers: Vec<Offer>,
    notice: Notice,
    code: StatusCode,
) -> Outcome {
    let branch_id = branch_of(staff, &form.branch_id)?;
    let client = state.pool.get().await?;
    let mut lines = Vec::with_capacity(form.lines.len());
    for (n, l) in form.lines.iter().enumerate() {
        let Ok(id) = Uuid::parse_str(&l.medicine_id) else {
            continue;
        };
        let Some(m) = medicines::get(&client, id, Some(branch_id)).await? else {
            continue;
        };
        let m = m.view();
        let counted = l.counted.trim().parse::<Decimal>().ok();
        let delta = counted.map(|c| c - Decimal::from(m.stock_quantity));
        let error = [
            format!("items[{n}].counted_quantity"),
            format!("items[{n}].medicine_id"),
            format!("items[{n}].notes"),
        ]
        .iter()
        .find_map(|f| notice.for_field(f).map(str::to_owned));
        lines.push(LineRow {
            n,
            medicine_id: l.medicine_id.clone(),
            name: m.name.clone(),
            ledger: m.stock_quantity,
            counted: l.counted.clone(),
            notes: l.notes.clone(),
            differs: delta.is_some_and(|d| !d.is_zero()),
            variance: delta.map(|d| {
                if d > Decimal::ZERO {
                    format!("+{d}")
                } else {
                    d.to_string()
                }
            }),
            error,
        });
    }
    let on_a_line = lines.iter().any(|l| l.error.is_some());
    let page_error = match notice.field.as_deref() {
        _ if on_a_line => None,
        Some("code") => None,
        _ => notice.error.clone(),
    };
    let ready = form.op == "check"
        && notice.error.is_none()
        && !lines.is_empty()
        && lines.iter().all(|l| l.variance.is_some());
    let mut branches = branch_options(
        &client,
        staff,
        staff.caller.any_branch().then_some(branch_id),
    )
    .await?;
    branches.retain(|b| !b.id.is_empty());
    html_status(
        code,
        &CountPage {
            chrome: Some(Chrome::new(staff, "/console/stock")),
            csrf: staff.csrf.clone(),
            code_error: notice.for_field("code").map(str::to_owned),
            page_error,
            notice,
            branches,
            code: form.code.clone(),
            offers,
            lines,
            ready,
        },
    )
}

#[derive(Debug, Default, Deserialize)]
pub struct CountQuery {
    pub branch_id: Option<String>,
    pub done: Option<i32>,
}

async fn count_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<CountQuery>,
) -> Outcome {
    staff.caller.require(Action::SubmitStockCount)?;
    let form = CountForm {
        branch_id: q.branch_id.clone().unwrap_or_default(),
        ..CountForm::default()
    };
    let notice = match q.done {
        Some(n) => Notice::done(format!(
            "The count was posted: {n} line(s) adjusted the stock."
        )),
        None => Notice::default(),
    };
    show(&state, &staff, &form, Vec::new(), notice, StatusCode::OK).await
}

/// Adds a medicine to the count (once: a second scan of it is where it is).
fn push(form: &mut CountForm, id: Uuid) {
    let id = id.to_string();
    if !form.lines.iter().any(|l| l.medicine_id == id) {
        form.lines.push(SentLine {
            medicine_id: id,
            ..SentLine::default()
        });
    }
    form.code.clear();
}

async fn work(state: web::Data<AppState>, posted: Posted<Vec<(String, String)>>) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::SubmitStockCount)?;
    let mut form = CountForm::of(form);
    let branch_id = branch_of(&staff, &form.branch_id)?;
    let op = form.op.clone();
    let mut offers = Vec::new();
    let attempt: Result<(), Error> = async {
        if let Some(id) = op.strip_prefix("pick:") {
            push(
                &mut form,
                optional_id("code", Some(id))?.unwrap_or_default(),
            );
        } else if let Some(n) = op
            .strip_prefix("remove-")
            .and_then(|n| n.parse::<usize>().ok())
        {
            if n < form.lines.len() {
                form.lines.remove(n);
            }
        } else if op == "post" {
            let lines = form.request()?.lines()?;
            let result = state
                .actors
                .branch(
                    branch_id,
                    SubmitCount {
                        branch_id,
                        user_id: staff.caller.user_id,
                        lines,
                    },
                )
                .await?;
            form.op = format!("done:{}", result.adjustments_made);
        } else if op == "check" {
            form.request()?.lines()?;
        } else if !form.code.trim().is_empty() {
            let client = state.pool.get().await?;
            let text = form.code.trim().to_owned();
            match lookup(&client, &text, branch_id, "code").await? {
                Found::Scanned(named) => push(&mut form, named.medicine_id),
                Found::One(m) => push(&mut form, m.id),
                Found::Many(many) => {
                    offers = many
                        .into_iter()
                        .map(|m| Offer {
                            value: format!("pick:{}", m.id),
                            label: format!("{} ({} on the ledger)", m.name, m.stock_quantity),
                        })
                        .collect();
                }
            }
        }
        Ok(())
    }
    .await;
    match attempt {
        Ok(()) => match form.op.strip_prefix("done:") {
            Some(n) => Ok(see_other(&format!(
                "/console/stock/count?done={n}&branch_id={}",
                form.branch_id
            ))),
            None => {
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
        },
        Err(
            e @ (Error::Validation { .. }
            | Error::Coded { .. }
            | Error::Conflict(_)
            | Error::NotFound(_)),
        ) => {
            let code = actix_web::ResponseError::status_code(&e);
            form.op.clear();
            show(&state, &staff, &form, offers, Notice::from_error(&e), code).await
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_without_its_count_is_refused_beside_it() {
        let f = CountForm::of(vec![
            ("line-0-medicine".to_owned(), Uuid::now_v7().to_string()),
            ("line-0-counted".to_owned(), " ".to_owned()),
        ]);
        let e = f.request().err().unwrap();
        assert!(
            matches!(e, Error::Validation { field: Some(ref f), .. } if f == "items[0].counted_quantity")
        );
    }
}
