//! Returns and credit notes: `POST /sales/{id}/returns` (and, through the
//! same code, a till's pushed return) takes back sale lines.
//!
//! One transaction per return, on the sale branch's actor: the sale lines
//! are locked (`FOR UPDATE`, in id order) and each line's
//! `returned_quantity` rises by a conditional update, so the units returned
//! (or awaiting approval) never exceed the units sold, whatever the number
//! of tills and server processes (a CHECK backs it). The refund of each
//! line is its share of the line's total and VAT, rounded so a whole line
//! refunds exactly what it cost.
//!
//! A return by an admin, branch manager or pharmacist (`Action::
//! IssueCreditNote`) is issued at once; anyone else's (a cashier's) waits as
//! `pending_approval` with an approval of kind `refund` whose
//! `reference_id` is the return. Approving it (never by the requester)
//! issues the credit note in the approval's transaction; rejecting it ends
//! the return and gives its units back to the sale lines.
//!
//! Issuing: the units go back onto the very batch they were sold from (a
//! `RETURN` movement) unless `restock` is false, a `credit` refund lowers
//! the customer's balance with a `REFUND` ledger row (never below zero),
//! the branch's credit note counter row is bumped (`cn_seq` gapless and
//! unique, `UNIQUE (branch_id, cn_seq)` behind it), the credit note is
//! hash-chained to the branch's previous one, the open cash session counts
//! the refund, a controlled medicine writes a register row with a negative
//! quantity, and the credit note joins the change feed (`credit_note`).
//!
//! Where things are: `model` (the request, the credit note, the refund
//! shares and the hash), `write` (filing, issuing, rejecting), `refund`
//! (which way a refund may go), `read`
//! (reads, replays, the chain check, the fiscal payload), and here the
//! branch actor's commands.

use crate::tables::Table;
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Query};
use serde::Deserialize;
use uuid::Uuid;

use crate::approvals::{self, Approval};
use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::idempotency;
use crate::role::{Action, Role};
use actors::runtime::Command;

mod model;
mod read;
mod refund;
mod write;

use model::{NewReturn, Outcome};
use read::replay;
use write::{file, issue, reject};

pub use model::{CreditNote, ReturnLineRequest, ReturnRequest, MAX_LINES};
pub use read::{
    fiscal_payload, get, get_shown, list, refund_approval_branch, sale_branch, verify_chain,
    CreditNoteChain, CreditNoteFiscalPayload, ListFilter,
};

/// `POST /sales/{id}/returns` through the sale branch's actor.
pub struct CreateReturn(pub NewReturn);

impl Command for CreateReturn {
    type Error = crate::Error;
    type Output = Outcome;
    const NAME: &'static str = "create_return";

    async fn run(self, pool: Pool) -> Result<Outcome> {
        let mut client = pool.get().await?;
        let r = self.0;
        if let Some(done) = replay(&client, &r).await? {
            return Ok(done);
        }
        let tx = client.transaction().await?;
        let attempt = match file(&tx, &r).await {
            Ok(note) => {
                crate::db::commit(tx).await?;
                Ok(Outcome {
                    note,
                    replayed: false,
                })
            }
            Err(e) => {
                drop(tx);
                Err(e)
            }
        };
        // Another process stored the same mutation id first: its return.
        let keyed = r.client_mutation_id.is_some();
        idempotency::replay_after_race(attempt, keyed, "return", || replay(&client, &r)).await
    }
}

/// Approves or rejects the approval a cashier's return waits for, on the
/// return's branch actor: the approval's checks and audit entry (as for
/// any approval), then the credit note issued, or the return ended, in the
/// same transaction. A refusal while issuing (a credit refund the balance
/// no longer covers) leaves the approval pending and nothing changed.
pub struct DecideRefund {
    pub approval_id: Uuid,
    pub approve: bool,
    pub decider: Uuid,
    pub decider_branch: Uuid,
    /// The decider may act on any branch (an admin).
    pub any_branch: bool,
}

impl Command for DecideRefund {
    type Error = crate::Error;
    type Output = Approval;
    const NAME: &'static str = "decide_refund";

    async fn run(self, pool: Pool) -> Result<Approval> {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        let status = if self.approve { "approved" } else { "rejected" };
        let (any, own) = (self.any_branch, self.decider_branch);
        let approval = approvals::decide_in(&tx, self.approval_id, status, self.decider, |b| {
            any || b == own
        })
        .await?;
        let q = Query::select()
            .column("id")
            .from(Table::SaleReturns)
            .and_where(Expr::col("approval_id").eq(self.approval_id))
            .to_owned();
        let return_id: Uuid = db::fetch_opt(&tx, &q)
            .await?
            .map(|r| r.get(0))
            .ok_or_else(|| Error::internal("the refund's return vanished"))?;
        if self.approve {
            issue(&tx, return_id, self.decider).await?;
        } else {
            reject(&tx, return_id).await?;
        }
        crate::db::commit(tx).await?;
        Ok(approval)
    }
}

/// A till's pushed return (`sale_return` / `create`): the `POST
/// /sales/{id}/returns` body plus `sale_id`, made on the device's branch
/// with the device and mutation id stored on the return (a unique key backs
/// the one-effect rule; the push ledger answers replays). The same rules
/// as REST: a cashier's return waits for an approval. Answers the return
/// (its id, and once issued its `cn_seq` and credit note number).
pub async fn push_create<C: GenericClient + Sync>(
    tx: &C,
    device_id: Uuid,
    branch_id: Uuid,
    user_id: Uuid,
    role: Role,
    cmid: &str,
    payload: &serde_json::Value,
) -> Result<CreditNote> {
    #[derive(Deserialize)]
    struct Pushed {
        sale_id: Uuid,
        /// When present, it must be the device's own branch.
        branch_id: Option<Uuid>,
        #[serde(flatten)]
        body: ReturnRequest,
    }
    if !Action::ReturnSale.permits(role) {
        return Err(Error::forbidden(format!(
            "Your role ({role}) may not write sale_return records."
        )));
    }
    let pushed: Pushed = serde_json::from_value(payload.clone())
        .map_err(|e| Error::bad_request(format!("The return is malformed: {e}.")))?;
    if pushed.branch_id.is_some_and(|b| b != branch_id) {
        return Err(Error::forbidden(
            "A device returns sales of its own branch only.",
        ));
    }
    let mut r = pushed
        .body
        .validate(pushed.sale_id, branch_id, user_id, role)?;
    r.device_id = Some(device_id);
    r.client_mutation_id = Some(cmid.to_owned());
    file(tx, &r).await
}
