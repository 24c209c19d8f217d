//! The invoice hash chain: the canonical text a sale hashes, and the check of
//! a branch's chain.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Order};
use serde::Serialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::model::Sale;
use super::read::{select_sales, with_items};
use crate::error::Result;
use crate::wire;

/// Hash the first invoice of a branch chains to.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The text an invoice hash covers: every figure of the sale and its lines,
/// then the previous invoice's hash.
pub fn canonical(s: &Sale, created_at: DateTime<Utc>) -> String {
    let opt = |u: Option<Uuid>| u.map(|u| u.to_string()).unwrap_or_default();
    let mut out = format!(
        "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}\n",
        s.branch_id,
        s.icv,
        s.invoice_number,
        created_at.format("%Y-%m-%dT%H:%M:%S%.6fZ"),
        s.payment_method,
        opt(s.customer_id),
        wire::two_places(s.discount),
        wire::two_places(s.subtotal),
        wire::two_places(s.vat),
        wire::two_places(s.total),
        s.previous_invoice_hash,
    );
    for i in &s.items {
        out.push_str(&format!(
            "{}|{}|{}|{}|{}|{}|{}",
            i.medicine_id,
            i.batch_id,
            i.quantity,
            wire::two_places(i.unit_price),
            wire::two_places(i.discount),
            wire::two_places(i.line_total),
            wire::two_places(i.vat_amount),
        ));
        // A line of loose units hashes as it always has; a pack or a
        // serial adds what the line counted and which pack it was.
        if i.pack_id.is_some() || i.serial.is_some() {
            out.push_str(&format!(
                "|{}|{}|{}|{}",
                opt(i.pack_id),
                i.pack_units,
                i.gtin.as_deref().unwrap_or_default(),
                i.serial.as_deref().unwrap_or_default(),
            ));
        }
        out.push('\n');
    }
    out
}

pub fn invoice_hash(s: &Sale, created_at: DateTime<Utc>) -> String {
    hex::encode(Sha256::digest(canonical(s, created_at).as_bytes()))
}

/// The result of checking a branch's invoice chain.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ChainReport {
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    /// `ok` or `broken`.
    pub status: String,
    /// Invoices checked.
    pub checked: i64,
    /// The first invoice whose link does not hold, when broken.
    pub first_broken: Option<BrokenLink>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BrokenLink {
    pub icv: i64,
    pub invoice_number: String,
    #[schema(value_type = String)]
    pub sale_id: Uuid,
    pub reason: String,
}

/// Walks a branch's invoices in icv order, recomputing every hash: the
/// first missing number, wrong previous hash or altered invoice is reported.
pub async fn verify_chain<C: GenericClient + Sync>(c: &C, branch_id: Uuid) -> Result<ChainReport> {
    const CHUNK: u64 = 500;
    let mut expected_prev = GENESIS_HASH.to_owned();
    let mut expected_icv = 1i64;
    let mut checked = 0i64;
    let broken = |s: &Sale, reason: &str, checked| ChainReport {
        branch_id,
        status: "broken".to_owned(),
        checked,
        first_broken: Some(BrokenLink {
            icv: s.icv,
            invoice_number: s.invoice_number.clone(),
            sale_id: s.id,
            reason: reason.to_owned(),
        }),
    };
    loop {
        let after = expected_icv - 1;
        let page = select_sales(c, |q| {
            q.and_where(Expr::col(("s", "branch_id")).eq(branch_id))
                .and_where(Expr::col(("s", "icv")).gt(after))
                .order_by(("s", "icv"), Order::Asc)
                .limit(CHUNK);
        })
        .await?;
        let done = (page.len() as u64) < CHUNK;
        for s in with_items(c, page).await? {
            checked += 1;
            if s.icv != expected_icv {
                return Ok(broken(&s, "invoice numbers skip or repeat here", checked));
            }
            if s.previous_invoice_hash != expected_prev {
                return Ok(broken(
                    &s,
                    "previous_invoice_hash does not match the previous invoice",
                    checked,
                ));
            }
            if invoice_hash(&s, s.created_at) != s.invoice_hash {
                return Ok(broken(
                    &s,
                    "the invoice content does not match its hash",
                    checked,
                ));
            }
            expected_prev = s.invoice_hash.clone();
            expected_icv += 1;
        }
        if done {
            break;
        }
    }
    Ok(ChainReport {
        branch_id,
        status: "ok".to_owned(),
        checked,
        first_broken: None,
    })
}
