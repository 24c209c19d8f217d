//! What a sale may dispense against a prescription, and what it records as
//! dispensed.

use crate::tables::Table;
use std::collections::HashMap;

use chrono::Utc;
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Query};
use tokio_postgres::Row;
use uuid::Uuid;

use super::model::Sale;
use super::plan::Product;
use super::request::NewSale;
use crate::db::{self, Stmt};
use crate::error::{Code, Error, Result};

/// One line of the prescription a sale names, as locked.
#[derive(Debug, Clone)]
pub(super) struct RxLine {
    pub(super) id: Uuid,
    pub(super) medicine_id: Uuid,
    pub(super) quantity: i32,
    pub(super) dispensed: i32,
}

/// The pending prescription a sale names, locked `FOR UPDATE`.
pub(super) struct Rx {
    pub(super) id: Uuid,
    pub(super) rx_number: String,
    pub(super) patient_id: String,
    pub(super) licence: String,
    pub(super) lines: Vec<RxLine>,
}

/// Locks the pending prescription of the branch a sale names and reads its
/// lines. Sales against one prescription queue on its row (two server
/// processes too), and the lines are read by a statement that starts once
/// the lock is held, so each sale sees what the previous ones dispensed.
pub(super) async fn prescription<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    branch_id: Uuid,
) -> Result<Rx> {
    let lock = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT rx_number, patient_id_number, prescriber_license FROM prescriptions
           WHERE id = {id} AND branch_id = {branch_id} AND status = 'PENDING' AND NOT is_deleted
           FOR UPDATE"#
    );
    let lines = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT id, medicine_id, quantity, dispensed_quantity FROM prescription_items
           WHERE prescription_id = {id} ORDER BY line_no, id"#
    );
    let answers = db::pipeline(
        tx,
        &[
            Stmt::raw(lock.sql, lock.values),
            Stmt::raw(lines.sql, lines.values),
        ],
    )
    .await?;
    let [head, lines]: [Vec<Row>; 2] = answers
        .try_into()
        .map_err(|_| Error::internal("the prescription read answered short"))?;
    let head = head.first().ok_or_else(|| {
        Error::validation(
            "prescription_id",
            "`prescription_id` must name a pending prescription of this branch.",
        )
    })?;
    Ok(Rx {
        id,
        rx_number: head.get(0),
        patient_id: head.get(1),
        licence: head.get(2),
        lines: lines
            .iter()
            .map(|r| RxLine {
                id: r.get(0),
                medicine_id: r.get(1),
                quantity: r.get(2),
                dispensed: r.get(3),
            })
            .collect(),
    })
}

/// A sale line the prescription does not cover: its index and how many
/// units of its medicine the prescription still allows (0 when the
/// medicine is not on it at all).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Uncovered {
    pub(super) line: usize,
    pub(super) on_prescription: bool,
    pub(super) allowed: i32,
}

/// Takes the sale's lines `(medicine, quantity)` from the prescription's
/// lines, in their order, each within what is left of it. Answers what
/// each prescription line gives out `(line id, units)`, or the first sale
/// line the prescription does not cover.
pub(super) fn allocate(
    rx: &[RxLine],
    sale: &[(Uuid, i32)],
) -> std::result::Result<Vec<(Uuid, i32)>, Uncovered> {
    let mut left: Vec<i32> = rx.iter().map(|l| l.quantity - l.dispensed).collect();
    let mut given = vec![0i32; rx.len()];
    for (i, &(medicine, quantity)) in sale.iter().enumerate() {
        let on_prescription = rx.iter().any(|l| l.medicine_id == medicine);
        let allowed: i32 = rx
            .iter()
            .zip(&left)
            .filter(|(l, _)| l.medicine_id == medicine)
            .map(|(_, n)| Ord::max(*n, 0))
            .sum();
        if !on_prescription || quantity > allowed {
            return Err(Uncovered {
                line: i,
                on_prescription,
                allowed,
            });
        }
        let mut wanted = quantity;
        for (k, l) in rx.iter().enumerate() {
            if wanted == 0 {
                break;
            }
            if l.medicine_id != medicine || left[k] <= 0 {
                continue;
            }
            let take = Ord::min(wanted, left[k]);
            left[k] -= take;
            given[k] += take;
            wanted -= take;
        }
    }
    Ok(rx
        .iter()
        .zip(given)
        .filter(|(_, n)| *n > 0)
        .map(|(l, n)| (l.id, n))
        .collect())
}

/// What a sale gives out against its prescription.
pub(super) struct Dispense {
    pub(super) rx_id: Uuid,
    pub(super) patient_id: String,
    pub(super) licence: String,
    /// Units per prescription line.
    pub(super) adds: Vec<(Uuid, i32)>,
    /// After this sale every line is fully dispensed.
    pub(super) completes: bool,
}

impl Dispense {
    /// Checks the sale against the locked prescription: 400 naming the
    /// first line whose medicine is not on it or exceeds what is left.
    pub(super) fn check(
        rx: Rx,
        sale: &NewSale,
        catalogue: &HashMap<Uuid, Product>,
    ) -> Result<Dispense> {
        // A prescription counts base units: a pack line asks for its packs'.
        let base = |l: &super::request::Line| {
            let units = catalogue.get(&l.medicine_id).map_or(1, |p| p.units_of(l));
            l.quantity.saturating_mul(units)
        };
        let wanted: Vec<(Uuid, i32)> = sale
            .lines
            .iter()
            .map(|l| (l.medicine_id, base(l)))
            .collect();
        let adds = allocate(&rx.lines, &wanted).map_err(|u| {
            let line = &sale.lines[u.line];
            let name = catalogue
                .get(&line.medicine_id)
                .map(|p| p.name.as_str())
                .unwrap_or_default();
            if u.on_prescription {
                Error::rule(
                    Code::PrescriptionExceeded,
                    format!("items[{}].quantity", u.line),
                    format!(
                        "Prescription {} allows {} more of {}; {} requested.",
                        rx.rx_number,
                        u.allowed,
                        name,
                        base(line)
                    ),
                )
            } else {
                Error::rule(
                    Code::PrescriptionRequired,
                    format!("items[{}].medicine_id", u.line),
                    format!(
                        "{} is not on prescription {}: 0 may be sold against it.",
                        name, rx.rx_number
                    ),
                )
            }
        })?;
        let completes = rx.lines.iter().all(|l| {
            let added: i32 = adds
                .iter()
                .filter(|(id, _)| *id == l.id)
                .map(|(_, n)| n)
                .sum();
            l.dispensed + added >= l.quantity
        });
        Ok(Dispense {
            rx_id: rx.id,
            patient_id: rx.patient_id,
            licence: rx.licence,
            adds,
            completes,
        })
    }

    /// The line updates (each answers a row only if it stays within the
    /// prescribed quantity), then the prescription row: its dispensed
    /// units, and when complete its move to `DISPENSED` with the sale.
    pub(super) fn stmts(&self, s: &Sale) -> Vec<Stmt> {
        let mut out: Vec<Stmt> = self
            .adds
            .iter()
            .map(|&(line, add)| {
                let rx_id = self.rx_id;
                let q = sea_query::raw_query!(
                    PostgresQueryBuilder,
                    r#"UPDATE prescription_items SET dispensed_quantity = dispensed_quantity + {add}
                       WHERE id = {line} AND prescription_id = {rx_id}
                         AND dispensed_quantity + {add} <= quantity
                       RETURNING id"#
                );
                Stmt::raw(q.sql, q.values)
            })
            .collect();
        let units: i32 = self.adds.iter().map(|(_, n)| n).sum();
        let mut q = Query::update()
            .table(Table::Prescriptions)
            .value("dispensed_units", Expr::col("dispensed_units").add(units))
            .value("updated_at", Utc::now())
            .and_where(Expr::col("id").eq(self.rx_id))
            .and_where(Expr::col("status").eq("PENDING"))
            .and_where(Expr::col("is_deleted").eq(false))
            .returning_col("id")
            .to_owned();
        if self.completes {
            q.value("status", "DISPENSED")
                .value("sale_id", s.id)
                .value("dispensed_by", s.created_by)
                .value("dispensed_at", s.created_at);
        }
        out.push(Stmt::of(&q));
        out
    }
}
