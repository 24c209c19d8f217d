//! Buying: purchase orders approved before they are sent (`orders`), goods
//! received against them with landed costs (`received`), and stock sent
//! back to the supplier for a debit note (`returns`). Invoices matched
//! against receipts live with the supplier invoices (`suppliers::invoices`).

pub mod orders;
pub mod received;
pub mod returns;

use deadpool_postgres::GenericClient;

use crate::db;
use crate::error::Result;

/// What is wrong in the buying books, in words (empty when nothing is):
/// an order line received beyond what it ordered without an allowed
/// over-receipt, or out of step with the posted notes against it; a
/// receipt line billed beyond what it received, or out of step with the
/// invoice lines billing it; a posted line that accepted stock without a
/// batch; a debit note out of step with its lines, settlements or counter
/// (`returns::invariant_violations`).
pub async fn invariant_violations<C: GenericClient + Sync>(c: &C) -> Result<Vec<String>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT 'order line ' || l.id || ' received ' || l.quantity_received || ' of '
                  || l.quantity_ordered || ' without an allowed over-receipt'
             FROM purchase_order_lines l
            WHERE l.quantity_received > l.quantity_ordered AND NOT l.over_received
           UNION ALL
           SELECT 'order line ' || l.id || ' says ' || l.quantity_received || ' received, '
                  || l.quantity_rejected || ' rejected, ' || l.quantity_invoiced
                  || ' billed; its posted notes say ' || coalesce(g.received, 0) || ', '
                  || coalesce(g.rejected, 0) || ', ' || coalesce(g.billed, 0)
             FROM purchase_order_lines l
             LEFT JOIN (SELECT gl.purchase_order_line_id AS id,
                               sum(gl.quantity_received) AS received,
                               sum(gl.quantity_rejected) AS rejected,
                               sum(gl.quantity_invoiced) AS billed
                          FROM goods_received_lines gl
                          JOIN goods_received_notes n ON n.id = gl.note_id
                         WHERE n.status = 'posted' AND gl.purchase_order_line_id IS NOT NULL
                         GROUP BY gl.purchase_order_line_id) g ON g.id = l.id
            WHERE l.quantity_received <> coalesce(g.received, 0)
               OR l.quantity_rejected <> coalesce(g.rejected, 0)
               OR l.quantity_invoiced <> coalesce(g.billed, 0)
           UNION ALL
           SELECT 'receipt line ' || gl.id || ' received ' || gl.quantity_received
                  || ' and says ' || gl.quantity_invoiced || ' billed; its invoices bill '
                  || coalesce(i.billed, 0)
             FROM goods_received_lines gl
             LEFT JOIN (SELECT goods_received_line_id AS id, sum(base_quantity) AS billed
                          FROM supplier_invoice_lines GROUP BY goods_received_line_id) i
                    ON i.id = gl.id
            WHERE gl.quantity_invoiced > gl.quantity_received
               OR gl.quantity_invoiced <> coalesce(i.billed, 0)
           UNION ALL
           SELECT 'posted receipt line ' || gl.id || ' accepted ' || gl.quantity_received
                  || ' units but names no batch'
             FROM goods_received_lines gl JOIN goods_received_notes n ON n.id = gl.note_id
            WHERE n.status = 'posted' AND gl.quantity_received > 0 AND gl.batch_id IS NULL"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let mut broken: Vec<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
    broken.extend(returns::invariant_violations(c).await?);
    Ok(broken)
}
