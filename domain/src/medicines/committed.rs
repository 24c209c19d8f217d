//! Medicines written from the API, each in a transaction of its own (a
//! till's pushed writes run the same rules inside its push transaction).

use uuid::Uuid;

use super::{Medicine, MedicineWrite};
use crate::db::Pool;
use crate::Result;

/// Creates a medicine (`name` and `selling_price` required; its stock starts at 0).
pub async fn create(pool: &Pool, body: MedicineWrite) -> Result<Medicine> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let created = super::create(&tx, body, None).await?;
    crate::db::commit(tx).await?;
    Ok(created)
}

/// Applies the fields present in `body` to live a medicine `id`; a price change by `actor` goes to the audit log.
pub async fn edit(pool: &Pool, id: Uuid, body: MedicineWrite, actor: Uuid) -> Result<Medicine> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let edited = super::edit(&tx, id, body, actor).await?;
    crate::db::commit(tx).await?;
    Ok(edited)
}

/// Soft-deletes live a medicine `id` (and deactivates it).
pub async fn remove(pool: &Pool, id: Uuid) -> Result<Medicine> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let removed = super::remove(&tx, id).await?;
    crate::db::commit(tx).await?;
    Ok(removed)
}
