//! The debit notes' part of the ledger invariants (`stock::invariant_violations`).

use deadpool_postgres::GenericClient;

use crate::db;
use crate::error::Result;

/// Debit notes numbered without gaps or repeats per branch, their counters
/// at the last number, each note worth the sum of its lines and used as
/// far as its settlements (never beyond its worth), and every debit-note
/// payment with its settlement of the same amount; each returned line
/// describes one violation.
pub async fn invariant_violations<C: GenericClient + Sync>(c: &C) -> Result<Vec<String>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT 'branch ' || branch_id || ' debit note seq has a gap or repeat: '
                  || count(*) || ' debit notes, max seq ' || max(seq)
           FROM supplier_returns GROUP BY branch_id
           HAVING count(*) <> max(seq) OR count(DISTINCT seq) <> count(*)
           UNION ALL
           SELECT 'branch ' || c.branch_id || ' debit note counter at ' || c.last_seq
                  || ' but last seq is ' || coalesce(r.top, 0)
           FROM debit_note_counters c
           LEFT JOIN (SELECT branch_id, max(seq) AS top FROM supplier_returns GROUP BY branch_id) r
                  ON r.branch_id = c.branch_id
           WHERE c.last_seq <> coalesce(r.top, 0)
           UNION ALL
           SELECT 'debit note ' || r.debit_note_number || ' is worth ' || r.total_value
                  || ' and has used ' || r.used_value || ', but its lines sum to '
                  || coalesce(i.total, 0) || ' and its settlements to ' || coalesce(d.total, 0)
           FROM supplier_returns r
           LEFT JOIN (SELECT supplier_return_id, sum(value) AS total FROM supplier_return_items
                      GROUP BY supplier_return_id) i ON i.supplier_return_id = r.id
           LEFT JOIN (SELECT supplier_return_id, sum(amount) AS total FROM debit_note_settlements
                      GROUP BY supplier_return_id) d ON d.supplier_return_id = r.id
           WHERE r.total_value <> coalesce(i.total, 0) OR r.used_value <> coalesce(d.total, 0)
              OR r.used_value > r.total_value
           UNION ALL
           SELECT 'supplier payment ' || p.id || ' by debit note has no settlement of '
                  || p.amount
           FROM supplier_payments p
           LEFT JOIN debit_note_settlements d ON d.payment_id = p.id
           WHERE p.method = 'debit_note' AND (d.id IS NULL OR d.amount <> p.amount)"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
}
