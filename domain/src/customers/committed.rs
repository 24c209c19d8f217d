//! Customers written from the API, each in a transaction of its own (a
//! till's pushed writes run the same rules inside its push transaction).

use uuid::Uuid;

use super::{Customer, CustomerWrite};
use crate::db::Pool;
use crate::Result;
use crate::Role;

/// Creates a customer (`name` required) for a caller of `role` (credit terms are the role's to set).
pub async fn create(pool: &Pool, body: CustomerWrite, role: Role) -> Result<Customer> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let created = super::create(&tx, body, None, role).await?;
    crate::db::commit(tx).await?;
    Ok(created)
}

/// Applies the fields present in `body` to live a customer `id`, for a caller of `role`.
pub async fn edit(pool: &Pool, id: Uuid, body: CustomerWrite, role: Role) -> Result<Customer> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let edited = super::edit(&tx, id, body, role).await?;
    crate::db::commit(tx).await?;
    Ok(edited)
}

/// Soft-deletes live a customer `id` who owes nothing (409 while a balance is owed).
pub async fn remove(pool: &Pool, id: Uuid) -> Result<Customer> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let removed = super::remove(&tx, id).await?;
    crate::db::commit(tx).await?;
    Ok(removed)
}
