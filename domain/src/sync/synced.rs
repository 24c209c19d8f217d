//! The one write path for synced catalogue rows (branches, medicines,
//! customers, suppliers): each write allocates a change-log rev, stores it on
//! the row and returns the row with that rev, for the caller to append its
//! change under it.

use chrono::Utc;
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Iden, IntoIden, Query};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::patch::Patch;
use crate::sync::changes;
use crate::tables::Table;
use crate::{db, Error, Result};

/// The columns every synced table has, which the write path sets itself.
#[derive(Iden, Clone, Copy)]
enum Synced {
    Id,
    Rev,
    UpdatedAt,
    IsDeleted,
}

/// Inserts a row (with a new id unless `fields` names one); returns it (as
/// `columns`) and its rev.
pub async fn insert<C: GenericClient + Sync>(
    tx: &C,
    table: Table,
    columns: &[&'static str],
    fields: Patch<impl Iden + Copy + 'static>,
) -> Result<(Row, i64)> {
    let rev = changes::allocate(tx).await?;
    let names_id = fields.names("id");
    let mut pairs = fields.into_pairs();
    if !names_id {
        pairs.push((Synced::Id.into_iden(), Uuid::now_v7().into()));
    }
    pairs.push((Synced::Rev.into_iden(), rev.into()));
    let (cols, vals): (Vec<_>, Vec<_>) = pairs.into_iter().unzip();
    let q = Query::insert()
        .into_table(table)
        .columns(cols)
        .values_panic(vals.into_iter().map(Into::into))
        .returning(Query::returning().columns(columns.iter().copied()))
        .to_owned();
    Ok((db::fetch_one(tx, &q).await?, rev))
}

/// Sets `fields` on a live (not deleted) row; `None` when there is none.
/// The rev is drawn by the update itself, once it holds the row: two
/// writers of one row get their revs in the order they write it (a rev
/// drawn before waiting for the row could be older than the write the
/// writer waited for, and a till applying the feed in rev order would end
/// with the earlier version).
pub async fn update<C: GenericClient + Sync>(
    tx: &C,
    table: Table,
    columns: &[&'static str],
    id: Uuid,
    fields: Patch<impl Iden + Copy + 'static>,
) -> Result<Option<(Row, i64)>> {
    let mut pairs = fields.into_pairs();
    pairs.push((Synced::UpdatedAt.into_iden(), Utc::now().into()));
    let q = Query::update()
        .table(table)
        .values(pairs.into_iter().map(|(c, v)| (c, Expr::val(v))))
        .value(Synced::Rev, Expr::cust("change_log_next_rev()"))
        .and_where(Expr::col(Synced::Id).eq(id))
        .and_where(Expr::col(Synced::IsDeleted).eq(false))
        .returning(Query::returning().columns(columns.iter().copied()))
        .to_owned();
    let Some(row) = db::fetch_opt(tx, &q).await? else {
        return Ok(None);
    };
    let rev: i64 = row.try_get("rev").map_err(Error::internal)?;
    Ok(Some((row, rev)))
}
