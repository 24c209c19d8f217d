//! The lines of stock that left its batches for good (written off, sent
//! back to the supplier), read once for both registers: the same batch,
//! medicine, units, cost and control flag, grouped by the document they
//! belong to.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::db;
use crate::error::Result;

/// One line as stored: its batch and medicine, the base units, the
/// batch's cost per unit, their value and whether the medicine was
/// controlled then.
pub struct LeftLine {
    pub batch_id: Uuid,
    pub medicine_id: Uuid,
    pub medicine_name: String,
    pub batch_number: String,
    pub quantity: i32,
    pub unit_cost: Decimal,
    pub value: Decimal,
    pub is_controlled: bool,
}

/// Which document's lines.
#[derive(Clone, Copy)]
pub enum Document {
    WriteOff,
    SupplierReturn,
}

/// The query of one document kind's lines, in line order; `$1` is the
/// documents' ids. Constant text per kind.
macro_rules! lines_sql {
    ($table:literal, $parent:literal) => {
        concat!(
            "SELECT i.",
            $parent,
            ", i.batch_id, i.medicine_id, m.name, b.batch_number,
                    i.quantity, i.unit_cost, i.value, i.is_controlled
             FROM ",
            $table,
            " i
             JOIN medicines m ON m.id = i.medicine_id
             JOIN batches b ON b.id = i.batch_id
             WHERE i.",
            $parent,
            " = ANY($1) ORDER BY i.",
            $parent,
            ", i.line_no"
        )
    };
}

impl Document {
    fn sql(self) -> &'static str {
        match self {
            Document::WriteOff => lines_sql!("write_off_items", "write_off_id"),
            Document::SupplierReturn => lines_sql!("supplier_return_items", "supplier_return_id"),
        }
    }
}

/// The lines of the documents `ids`, by document, each in line order.
async fn lines<C: GenericClient + Sync>(
    c: &C,
    of: Document,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<LeftLine>>> {
    let values = sea_query::Values(vec![ids.to_vec().into()]);
    let rows = db::raw_all(c, of.sql(), values).await?;
    let mut by_document: HashMap<Uuid, Vec<LeftLine>> = HashMap::new();
    for r in &rows {
        by_document
            .entry(r.try_get(0)?)
            .or_default()
            .push(LeftLine {
                batch_id: r.try_get(1)?,
                medicine_id: r.try_get(2)?,
                medicine_name: r.try_get(3)?,
                batch_number: r.try_get(4)?,
                quantity: r.try_get(5)?,
                unit_cost: r.try_get(6)?,
                value: r.try_get(7)?,
                is_controlled: r.try_get(8)?,
            });
    }
    Ok(by_document)
}

/// Reads the lines of `found` (documents of kind `of`) and gives each
/// document its own, in line order, as the register's line type.
pub async fn attach<C, D, L>(
    c: &C,
    of: Document,
    found: &mut [D],
    id: impl Fn(&D) -> Uuid,
    lines_of: impl Fn(&mut D) -> &mut Vec<L>,
) -> Result<()>
where
    C: GenericClient + Sync,
    L: From<LeftLine>,
{
    if found.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = found.iter().map(&id).collect();
    let mut by_document = lines(c, of, &ids).await?;
    for d in found.iter_mut() {
        let mine = by_document.remove(&id(d)).unwrap_or_default();
        *lines_of(d) = mine.into_iter().map(L::from).collect();
    }
    Ok(())
}

/// `From<LeftLine>` for a register's line type: each register keeps its
/// own documented schema, with the same fields.
macro_rules! from_left_line {
    ($line:ident) => {
        impl From<$crate::stock::left::LeftLine> for $line {
            fn from(l: $crate::stock::left::LeftLine) -> Self {
                $line {
                    batch_id: l.batch_id,
                    medicine_id: l.medicine_id,
                    medicine_name: l.medicine_name,
                    batch_number: l.batch_number,
                    quantity: l.quantity,
                    unit_cost: l.unit_cost,
                    value: l.value,
                    is_controlled: l.is_controlled,
                }
            }
        }
    };
}
pub(crate) use from_left_line;
