//! Stock write-offs: expired, damaged, recalled or lost units taken off the
//! books, and the destruction register of the controlled ones.
//!
//! One transaction per write-off, on the branch's actor, all or nothing:
//! the batches are locked (`FOR UPDATE`, in the order sales lock them, so a
//! write-off and a sale of the same batches queue instead of deadlocking),
//! every line is checked against what its batch still holds, and each line
//! writes a `WRITE_OFF` movement through the stock ledger's conditional
//! update, so a batch never goes below zero, whatever the number of server
//! processes (the CHECK on `qty_remaining` backs it). A line of a
//! controlled medicine needs a witness; the line keeps the medicine's flag
//! and the witness's name, and a CHECK refuses a controlled line without one.
//!
//! Where things are: `read` (one write-off, the list, the expired batches
//! and the destruction register), and here the request, its validation and
//! the branch actor's command.

use crate::fiscal;
use crate::tables::Table;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::Query;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::db::{self, Pool, Stmt};
use crate::error::{Error, Result};
use crate::input;
use crate::stock::{self, Kind, Movement};
use crate::wire;
use actors::runtime::Command;

mod read;

pub use read::{
    destruction_register, expired, get, list, DestructionRow, ExpiredBatch, ListFilter,
};

/// Why stock is written off.
pub const REASONS: [&str; 5] = ["expired", "damaged", "recalled", "lost", "other"];

/// Most lines one write-off may carry.
pub const MAX_LINES: usize = 2000;

/// A write-off as a client sends it.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct WriteOffRequest {
    /// Admins only: another branch (default the caller's).
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    /// `expired`, `damaged`, `recalled`, `lost` or `other`. Required.
    pub reason: Option<String>,
    /// The batches and units written off.
    pub items: Vec<WriteOffLineRequest>,
    pub notes: Option<String>,
    /// Who witnessed the destruction, by name: someone other than the
    /// caller (not the caller's name or email), with at least two letters.
    /// A controlled line needs this or `witness_user_id`.
    pub witness_name: Option<String>,
    /// Who witnessed the destruction, as a user: an active user of the
    /// write-off's branch other than the caller; the register shows their
    /// name. Give this or `witness_name`, not both.
    #[schema(value_type = Option<String>)]
    pub witness_user_id: Option<Uuid>,
}

#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct WriteOffLineRequest {
    #[schema(value_type = String)]
    pub batch_id: Uuid,
    #[schema(value_type = f64, minimum = 1)]
    #[serde(deserialize_with = "input::json_number")]
    pub quantity: Decimal,
}

/// Who witnessed a destruction, as the request named them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Witness {
    /// A name typed in; checked against the caller when recorded.
    Named(String),
    /// A user of the branch; the register shows their name.
    User(Uuid),
}

/// A validated write-off to record.
#[derive(Debug, Clone)]
pub struct NewWriteOff {
    pub branch_id: Uuid,
    pub reason: String,
    /// `(batch, units)`, in the order sent.
    pub lines: Vec<(Uuid, i32)>,
    pub notes: String,
    pub witness: Option<Witness>,
    pub user_id: Uuid,
}

impl WriteOffRequest {
    /// Checks the shape of the request (400 naming the field); batches,
    /// what they hold and whether a witness is needed are checked in the
    /// transaction.
    pub fn validate(self, branch_id: Uuid, user_id: Uuid) -> Result<NewWriteOff> {
        let reason = input::required_text(
            "reason",
            self.reason.as_deref().unwrap_or_default(),
            input::max::LABEL,
        )?
        .to_lowercase();
        if !REASONS.contains(&reason.as_str()) {
            return Err(Error::validation(
                "reason",
                "`reason` must be one of expired, damaged, recalled, lost, other.",
            ));
        }
        if self.items.is_empty() {
            return Err(Error::validation(
                "items",
                "A write-off needs at least one item.",
            ));
        }
        if self.items.len() > MAX_LINES {
            return Err(Error::validation(
                "items",
                format!("A write-off may have at most {MAX_LINES} items."),
            ));
        }
        let mut lines: Vec<(Uuid, i32)> = Vec::with_capacity(self.items.len());
        for (i, item) in self.items.iter().enumerate() {
            let quantity = input::quantity(&format!("items[{i}].quantity"), item.quantity)?;
            if lines.iter().any(|(b, _)| *b == item.batch_id) {
                return Err(Error::validation(
                    format!("items[{i}].batch_id"),
                    "This batch is listed twice; give its whole quantity once.",
                ));
            }
            lines.push((item.batch_id, quantity));
        }
        let notes = input::multiline(
            "notes",
            self.notes.as_deref().unwrap_or_default(),
            input::max::NOTES,
        )?;
        let witness_name = input::text(
            "witness_name",
            self.witness_name.as_deref().unwrap_or_default(),
            input::max::NAME,
        )?;
        let witness = match (witness_name.is_empty(), self.witness_user_id) {
            (true, None) => None,
            (true, Some(id)) => Some(Witness::User(id)),
            (false, None) => Some(Witness::Named(witness_name)),
            (false, Some(_)) => {
                return Err(Error::validation(
                    "witness_user_id",
                    "Give the witness as `witness_name` or as `witness_user_id`, not both.",
                ))
            }
        };
        if let Some(Witness::Named(name)) = &witness {
            if name.chars().filter(|c| c.is_alphabetic()).count() < 2 {
                return Err(Error::validation(
                    "witness_name",
                    "`witness_name` must be a person's name (at least two letters).",
                ));
            }
        }
        Ok(NewWriteOff {
            branch_id,
            reason,
            lines,
            notes,
            witness,
            user_id,
        })
    }
}

/// A write-off as answered. Money as decimal strings.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct WriteOff {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub reason: String,
    pub items: Vec<WriteOffItem>,
    /// Σ quantity × unit cost of the lines.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub total_value: Decimal,
    pub notes: String,
    /// The witness's name: as typed, or the witnessing user's name.
    pub witness_name: Option<String>,
    /// The witnessing user, when the witness was given as a user.
    #[schema(value_type = Option<String>)]
    pub witness_user_id: Option<Uuid>,
    #[schema(value_type = String)]
    pub created_by: Uuid,
    pub created_by_name: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct WriteOffItem {
    #[schema(value_type = String)]
    pub batch_id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    pub batch_number: String,
    pub quantity: i32,
    /// The batch's cost per base unit (4 places where it has them).
    #[serde(serialize_with = "wire::cost_str")]
    #[schema(value_type = String)]
    pub unit_cost: Decimal,
    /// quantity × unit cost.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub value: Decimal,
    /// The medicine was controlled when written off (a destruction register row).
    pub is_controlled: bool,
}

crate::stock::left::from_left_line!(WriteOffItem);

/// `POST /stock/write-offs` through the branch's actor.
pub struct RecordWriteOff(pub NewWriteOff);

impl Command for RecordWriteOff {
    type Error = crate::Error;
    type Output = WriteOff;
    const NAME: &'static str = "record_write_off";

    async fn run(self, pool: Pool) -> Result<WriteOff> {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        let id = record(&tx, &self.0).await?;
        crate::db::commit(tx).await?;
        get(&client, id)
            .await?
            .ok_or_else(|| Error::internal("the write-off just recorded vanished"))
    }
}

/// Records a write-off in `tx` and returns its id. The caller commits.
pub async fn record<C: GenericClient + Sync>(tx: &C, w: &NewWriteOff) -> Result<Uuid> {
    if crate::branches::get(tx, w.branch_id).await?.is_none() {
        return Err(Error::validation(
            "branch_id",
            "`branch_id` names no branch.",
        ));
    }
    let witness = match &w.witness {
        None => None,
        Some(named) => Some(witness(tx, w, named).await?),
    };
    let witness_name = witness.as_ref().map(|(name, _)| name.clone());
    let witness_user_id = witness.as_ref().and_then(|(_, user)| *user);
    let ids: Vec<Uuid> = w.lines.iter().map(|(b, _)| *b).collect();
    let locked = stock::lock_by_id(tx, &ids).await?;
    let by_id: HashMap<Uuid, &stock::LockedBatch> =
        locked.iter().map(|b| (b.batch_id, b)).collect();
    let medicine_ids: Vec<Uuid> = locked.iter().map(|b| b.medicine_id).collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT id, name, is_controlled FROM medicines WHERE id = ANY({medicine_ids})"
    );
    let medicines: HashMap<Uuid, (String, bool)> = db::raw_all(tx, &q.sql, q.values)
        .await?
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    let mut lines = Vec::with_capacity(w.lines.len());
    for (i, (batch_id, quantity)) in w.lines.iter().enumerate() {
        let batch = by_id
            .get(batch_id)
            .filter(|b| b.branch_id == w.branch_id && !b.is_deleted)
            .ok_or_else(|| {
                Error::validation(
                    format!("items[{i}].batch_id"),
                    "This names no batch of the branch.",
                )
            })?;
        if *quantity > batch.remaining {
            return Err(Error::validation(
                format!("items[{i}].quantity"),
                format!(
                    "Batch {} holds {} units: at most {} can be written off, not {}.",
                    batch.batch_number, batch.remaining, batch.remaining, quantity
                ),
            ));
        }
        let (name, controlled) = medicines
            .get(&batch.medicine_id)
            .cloned()
            .unwrap_or_default();
        if controlled && witness.is_none() {
            return Err(Error::validation(
                "witness_name",
                format!(
                    "{name} (items[{i}]) is a controlled medicine: its destruction needs a \
                     witness other than you (`witness_name` or `witness_user_id`)."
                ),
            ));
        }
        lines.push((*batch, *quantity, controlled));
    }
    let id = Uuid::now_v7();
    // A batch's units at cost, as the reports value them (their share of
    // what the batch cost).
    let value = |b: &stock::LockedBatch, q: i32| {
        stock::cost::value(q, b.unit_cost, b.received_total, b.qty_received)
    };
    let total: Decimal = lines.iter().map(|(b, q, _)| value(b, *q)).sum();
    let header = Query::insert()
        .into_table(Table::WriteOffs)
        .columns([
            "id",
            "branch_id",
            "reason",
            "notes",
            "witness_name",
            "witness_user_id",
            "total_value",
            "created_by",
            "created_at",
        ])
        .values_panic([
            id.into(),
            w.branch_id.into(),
            w.reason.clone().into(),
            w.notes.clone().into(),
            witness_name.clone().into(),
            witness_user_id.into(),
            total.into(),
            w.user_id.into(),
            Utc::now().into(),
        ])
        .to_owned();
    let mut items = Query::insert()
        .into_table(Table::WriteOffItems)
        .columns([
            "id",
            "write_off_id",
            "line_no",
            "batch_id",
            "medicine_id",
            "quantity",
            "unit_cost",
            "value",
            "is_controlled",
            "witness_name",
            "witness_user_id",
        ])
        .to_owned();
    for (n, (b, q, controlled)) in lines.iter().enumerate() {
        let (witness, witness_user) = match controlled {
            true => (witness_name.clone().unwrap_or_default(), witness_user_id),
            false => (String::new(), None),
        };
        items.values_panic([
            Uuid::now_v7().into(),
            id.into(),
            (n as i32).into(),
            b.batch_id.into(),
            b.medicine_id.into(),
            (*q).into(),
            b.unit_cost.into(),
            value(b, *q).into(),
            (*controlled).into(),
            witness.into(),
            witness_user.into(),
        ]);
    }
    db::pipeline(tx, &[Stmt::of(&header), Stmt::of(&items)]).await?;
    // In the batches' lock order: each a conditional update and a movement.
    for b in &locked {
        let Some((_, q, _)) = lines.iter().find(|(l, _, _)| l.batch_id == b.batch_id) else {
            continue;
        };
        let out = Movement {
            batch_id: b.batch_id,
            delta: -q,
            kind: Kind::WriteOff,
            reference: Some(("write_off", id)),
            user_id: w.user_id,
        };
        stock::apply(tx, out).await?;
    }
    // The stock decrease for the tax authority, with EFRIS's reason.
    let gone: Vec<fiscal::payload::StockLine> = lines
        .iter()
        .map(|(b, q, _)| fiscal::payload::StockLine {
            medicine_id: b.medicine_id,
            quantity: *q,
            unit_cost: b.unit_cost,
        })
        .collect();
    let decrease =
        fiscal::payload::stock_decrease(id, w.branch_id, &w.reason, &w.notes, Utc::now(), &gone);
    fiscal::outbox::enqueue(tx, &[decrease]).await?;
    Ok(id)
}

/// Folds a name for comparison: case, surrounding spaces and inner runs of
/// spaces ignored.
fn folded(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The witness's name (and user) as the register keeps it. A destruction
/// is witnessed by someone other than the person who records it: a typed
/// name equal to the caller's own name or email is refused, and a user
/// must be another active user of the write-off's branch.
async fn witness<C: GenericClient + Sync>(
    tx: &C,
    w: &NewWriteOff,
    given: &Witness,
) -> Result<(String, Option<Uuid>)> {
    match given {
        Witness::Named(name) => {
            let me = crate::users::get(tx, w.user_id).await?;
            let mine = me.iter().flat_map(|u| [&u.full_name, &u.email]);
            if mine.into_iter().any(|own| folded(own) == folded(name)) {
                return Err(Error::validation(
                    "witness_name",
                    "The witness must be someone other than you: `witness_name` is your own \
                     name or email.",
                ));
            }
            Ok((name.clone(), None))
        }
        Witness::User(id) => {
            let user = crate::users::get(tx, *id)
                .await?
                .filter(|u| u.is_active && !u.is_deleted && u.branch_id == w.branch_id);
            match user {
                Some(u) if u.id != w.user_id => Ok((u.full_name, Some(u.id))),
                Some(_) => Err(Error::validation(
                    "witness_user_id",
                    "The witness must be someone other than you.",
                )),
                None => Err(Error::validation(
                    "witness_user_id",
                    "`witness_user_id` names no active user of the write-off's branch.",
                )),
            }
        }
    }
}
