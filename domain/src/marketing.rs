//! Public marketing enquiries.

use deadpool_postgres::GenericClient;
use sea_query::Query;
use uuid::Uuid;

use crate::{db, Result};

/// An enquiry, already validated.
pub struct Enquiry {
    pub name: String,
    pub email: String,
    pub phone: String,
    pub topic: String,
    pub message: String,
    pub client_address: String,
}

pub async fn insert<C: GenericClient + Sync>(c: &C, e: Enquiry) -> Result<Uuid> {
    let id = Uuid::now_v7();
    let q = Query::insert()
        .into_table("marketing_enquiries")
        .columns([
            "id",
            "name",
            "email",
            "phone",
            "topic",
            "message",
            "client_address",
        ])
        .values_panic([
            id.into(),
            e.name.into(),
            e.email.into(),
            e.phone.into(),
            e.topic.into(),
            e.message.into(),
            e.client_address.into(),
        ])
        .to_owned();
    db::execute(c, &q).await?;
    Ok(id)
}
