//! Suppliers written from the API, each in a transaction of its own (a
//! till's pushed writes run the same rules inside its push transaction).

use uuid::Uuid;

use super::{Supplier, SupplierWrite};
use crate::db::Pool;
use crate::Result;

/// Creates a supplier (active, `name` required).
pub async fn create(pool: &Pool, body: SupplierWrite) -> Result<Supplier> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let created = super::create(&tx, body, None).await?;
    crate::db::commit(tx).await?;
    Ok(created)
}

/// Applies the fields present in `body` to live a supplier `id`.
pub async fn edit(pool: &Pool, id: Uuid, body: SupplierWrite) -> Result<Supplier> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let edited = super::edit(&tx, id, body).await?;
    crate::db::commit(tx).await?;
    Ok(edited)
}

/// Soft-deletes live a supplier `id` (and deactivates it).
pub async fn remove(pool: &Pool, id: Uuid) -> Result<Supplier> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let removed = super::remove(&tx, id).await?;
    crate::db::commit(tx).await?;
    Ok(removed)
}
