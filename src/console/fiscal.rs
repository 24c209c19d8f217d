//! The fiscal queue: documents by status and kind with the authority's
//! last message, the oldest unfinished age per branch, a document's every
//! attempt, and retry after correction. The same domain functions and role
//! checks as `/fiscal/documents`, `/fiscal/summary` and
//! `/fiscal/documents/{id}/retry`.

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use serde::Deserialize;
use uuid::Uuid;

use super::forms::{base_of, Choice, Pager};
use super::{
    branch_options, html_status, optional_id, see_other, when, BranchOption, Chrome, NoFields,
    Notice, Outcome, Posted, Staff,
};
use crate::state::AppState;
use domain::fiscal::read::{self, DocumentFilter, FiscalDocument};
use domain::fiscal::STATUSES;
use domain::input::path_id;
use domain::paging::PageParams;
use domain::window::DateWindow;
use domain::{branches, Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/fiscal", web::get().to(queue_page))
        .route("/fiscal/{id}", web::get().to(document_page))
        .route("/fiscal/{id}/retry", web::post().to(retry));
}

const PAGE_SIZE: i64 = 50;
const KINDS: [(&str, &str); 4] = [
    ("T109", "Invoice"),
    ("T110", "Credit note"),
    ("T130", "Goods registration"),
    ("T131", "Stock change"),
];

fn kind_label(k: &str) -> &str {
    KINDS.iter().find(|(v, _)| *v == k).map_or(k, |(_, l)| *l)
}

/// An age in words: "3 h 12 min", "45 s".
pub fn age(seconds: i64) -> String {
    let (d, h, m) = (
        seconds / 86_400,
        seconds % 86_400 / 3600,
        seconds % 3600 / 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{seconds} s"),
        (0, 0, m) => format!("{m} min"),
        (0, h, m) => format!("{h} h {m} min"),
        (d, h, _) => format!("{d} d {h} h"),
    }
}

pub struct DocRow {
    pub id: String,
    pub kind: String,
    pub reference: String,
    pub branch: String,
    pub status: String,
    pub attempts: i32,
    pub queued: String,
    pub fdn: String,
    pub message: String,
}

fn doc_row(d: &FiscalDocument, names: &HashMap<Uuid, String>) -> DocRow {
    DocRow {
        id: d.id.to_string(),
        kind: kind_label(&d.kind).to_owned(),
        reference: d.seller_reference.clone(),
        branch: d
            .branch_id
            .and_then(|b| names.get(&b).cloned())
            .unwrap_or_else(|| "(no branch)".to_owned()),
        status: d.fiscal.status.clone(),
        attempts: d.attempts,
        queued: when(d.created_at),
        fdn: d
            .fiscal
            .fdn
            .clone()
            .or_else(|| d.fiscal.reference_no.clone())
            .unwrap_or_default(),
        message: d.fiscal.last_error.clone().unwrap_or_default(),
    }
}

pub struct SummaryRow {
    pub branch: String,
    pub waiting: i64,
    pub pending: i64,
    pub retrying: i64,
    pub rejected: i64,
    pub accepted: i64,
    pub oldest: String,
}

#[derive(Template)]
#[template(path = "console/fiscal.html")]
struct QueuePage {
    chrome: Option<Chrome>,
    statuses: Vec<Choice>,
    kinds: Vec<Choice>,
    branches: Vec<BranchOption>,
    summary: Vec<SummaryRow>,
    rows: Vec<DocRow>,
    pager: Pager,
}

#[derive(Debug, Default, Deserialize)]
pub struct QueueQuery {
    pub status: Option<String>,
    pub kind: Option<String>,
    pub branch_id: Option<String>,
    pub page: Option<i64>,
}

async fn branch_names<C: deadpool_postgres::GenericClient + Sync>(
    c: &C,
) -> Result<HashMap<Uuid, String>, Error> {
    Ok(branches::list(c, None)
        .await?
        .into_iter()
        .map(|b| (b.id, format!("{} ({})", b.name, b.code)))
        .collect())
}

async fn queue_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<QueueQuery>,
) -> Outcome {
    staff.caller.require(Action::ReadFiscalDocuments)?;
    let requested = optional_id("branch_id", q.branch_id.as_deref())?;
    let branch_id = staff.caller.branch_filter(requested)?;
    let status = q.status.clone().filter(|s| !s.is_empty());
    let kind = q.kind.clone().filter(|s| !s.is_empty());
    read::check_filter(status.as_deref(), kind.as_deref())?;
    let page = PageParams {
        page: q.page,
        page_size: Some(PAGE_SIZE),
    }
    .resolve(PAGE_SIZE)?;
    let client = state.pool.get().await?;
    let (from, until) = DateWindow::optional(None, None)?.bounds(&client).await?;
    let filter = DocumentFilter {
        status: status.clone(),
        kind: kind.clone(),
        branch_id,
        from,
        until,
    };
    let (items, total) =
        read::list(&client, &filter, page.offset() as i64, page.limit() as i64).await?;
    let names = branch_names(&client).await?;
    let summary = read::summary(&client, branch_id)
        .await?
        .into_iter()
        .map(|s| SummaryRow {
            branch: s
                .branch_id
                .and_then(|b| names.get(&b).cloned())
                .unwrap_or_else(|| "Goods registrations (no branch)".to_owned()),
            waiting: s.waiting,
            pending: s.pending + s.submitting,
            retrying: s.retrying,
            rejected: s.rejected,
            accepted: s.accepted,
            oldest: s
                .oldest_unfinished_seconds
                .map_or_else(|| "nothing unfinished".to_owned(), age),
        })
        .collect();
    let current_status = status.unwrap_or_default();
    let current_kind = kind.unwrap_or_default();
    let mut statuses = vec![Choice::new("", "Any status", &current_status)];
    statuses.extend(
        STATUSES
            .iter()
            .map(|s| Choice::new(*s, *s, &current_status)),
    );
    let mut kinds = vec![Choice::new("", "Any kind", &current_kind)];
    kinds.extend(
        KINDS
            .iter()
            .map(|(v, l)| Choice::new(*v, *l, &current_kind)),
    );
    let branch_text = requested.map(|b| b.to_string()).unwrap_or_default();
    let base = base_of(
        "/console/fiscal",
        &[
            ("status", current_status.as_str()),
            ("kind", current_kind.as_str()),
            ("branch_id", branch_text.as_str()),
        ],
    );
    html_status(
        StatusCode::OK,
        &QueuePage {
            chrome: Some(Chrome::new(&staff, "/console/fiscal")),
            statuses,
            kinds,
            branches: branch_options(&client, &staff, requested).await?,
            summary,
            rows: items.iter().map(|d| doc_row(d, &names)).collect(),
            pager: Pager::new(&base, page, total),
        },
    )
}

pub struct AttemptRow {
    pub attempt: i32,
    pub at: String,
    pub outcome: String,
    pub code: String,
    pub message: String,
}

#[derive(Template)]
#[template(path = "console/fiscal_document.html")]
struct DocumentPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    doc: DocRow,
    revision: i32,
    verification_code: String,
    qr: String,
    simulated: bool,
    sale_id: String,
    attempts: Vec<AttemptRow>,
    can_retry: bool,
}

#[derive(Debug, Default, Deserialize)]
pub struct DocQuery {
    pub done: Option<String>,
}

/// Goods registrations belong to no branch: every reader sees them.
fn visible(staff: &Staff, branch_id: Option<Uuid>) -> bool {
    branch_id.is_none_or(|b| staff.caller.can_see_branch(b))
}

async fn document_page(
    state: web::Data<AppState>,
    staff: Staff,
    id: web::Path<String>,
    q: web::Query<DocQuery>,
) -> Outcome {
    staff.caller.require(Action::ReadFiscalDocuments)?;
    let id = path_id(&id, "Fiscal document")?;
    let client = state.pool.get().await?;
    let d = read::get(&client, id)
        .await?
        .filter(|d| visible(&staff, d.document.branch_id))
        .ok_or_else(|| Error::not_found("Fiscal document not found"))?;
    let names = branch_names(&client).await?;
    let notice = match q.done.as_deref() {
        Some("retried") => Notice::done(
            "A new revision was queued from the corrected source; it is sent when what it depends on is accepted.",
        ),
        _ => Notice::default(),
    };
    html_status(
        StatusCode::OK,
        &DocumentPage {
            chrome: Some(Chrome::new(&staff, "/console/fiscal")),
            csrf: staff.csrf.clone(),
            notice,
            doc: doc_row(&d.document, &names),
            revision: d.document.revision,
            verification_code: d
                .document
                .fiscal
                .verification_code
                .clone()
                .unwrap_or_default(),
            qr: d.document.fiscal.qr_code.clone().unwrap_or_default(),
            simulated: d.document.fiscal.simulated,
            sale_id: if d.document.kind == "T109" {
                d.document.source_id.to_string()
            } else {
                String::new()
            },
            attempts: d
                .attempts_log
                .iter()
                .map(|a| AttemptRow {
                    attempt: a.attempt,
                    at: when(a.started_at),
                    outcome: a.outcome.clone(),
                    code: a.return_code.clone().unwrap_or_default(),
                    message: a.message.clone(),
                })
                .collect(),
            can_retry: d.document.fiscal.status == "rejected"
                && Action::RetryFiscalDocuments.permits(staff.role()),
        },
    )
}

async fn retry(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<NoFields>,
) -> Outcome {
    let staff = posted.staff;
    staff.caller.require(Action::RetryFiscalDocuments)?;
    let id = path_id(&id, "Fiscal document")?;
    let mut client = state.pool.get().await?;
    let made = read::retry_visible(&mut client, id, |b| visible(&staff, b)).await?;
    Ok(see_other(&format!("/console/fiscal/{made}?done=retried")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_in_words() {
        assert_eq!(age(45), "45 s");
        assert_eq!(age(600), "10 min");
        assert_eq!(age(3 * 3600 + 12 * 60), "3 h 12 min");
        assert_eq!(age(2 * 86_400 + 3600), "2 d 1 h");
    }
}
