//! Public marketing enquiries.

use crate::tables::Table;
use deadpool_postgres::GenericClient;
use sea_query::Query;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::db::{self, Pool};
use crate::users::rate_limits;
use crate::{input, Error, Result};

/// The enquiry limits: per email address and per client address, in a
/// fixed window.
#[derive(Debug, Clone, Copy)]
pub struct EnquiryLimits {
    pub per_email: i32,
    pub per_address: i32,
    pub window_secs: i64,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ContactRequest {
    /// Required, non-blank.
    pub name: Option<String>,
    /// Required; one `@`, a non-empty local part, a dot in the domain, no spaces.
    pub email: Option<String>,
    pub phone: Option<String>,
    pub topic: Option<String>,
    /// Required, non-blank, at most 5,000 characters.
    pub message: Option<String>,
}

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
        .into_table(Table::MarketingEnquiries)
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

/// A structural check only: whether mail can be delivered is not ours to know.
fn address_like(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && !email.chars().any(char::is_whitespace)
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains("..")
}

fn enquiry(body: ContactRequest, client_address: String) -> Result<Enquiry> {
    let text = |field: &str, v: &Option<String>, max: usize| {
        input::text(field, v.as_deref().unwrap_or_default(), max)
    };
    let required = |field: &str, v: &Option<String>, max: usize| {
        input::required_text(field, v.as_deref().unwrap_or_default(), max)
    };
    let name = required("name", &body.name, 200)?;
    let email = required("email", &body.email, 254)?;
    if !address_like(&email) {
        return Err(Error::validation(
            "email",
            "`email` must be an email address such as name@example.com.",
        ));
    }
    Ok(Enquiry {
        name,
        email,
        phone: text("phone", &body.phone, 50)?,
        topic: text("topic", &body.topic, 100)?,
        message: input::required_multiline(
            "message",
            body.message.as_deref().unwrap_or_default(),
            5000,
        )?,
        client_address,
    })
}

/// Stores a public enquiry from `address`, under the enquiry limits: a
/// refused (400) message does not count, and over either limit is 429.
pub async fn receive(
    pool: &Pool,
    limits: EnquiryLimits,
    body: ContactRequest,
    address: String,
) -> Result<()> {
    // Validate first: a refused (400) message does not count.
    let enquiry = enquiry(body, address.clone())?;
    let email_key = format!("marketing:email:{}", enquiry.email.to_lowercase());
    let addr_key = format!("marketing:addr:{address}");
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    // The counter rows stay locked until commit, so concurrent enquiries are
    // counted one at a time (always email before address: no lock cycle); a
    // refused one rolls back and does not count either.
    let by_email = rate_limits::hit(&tx, &email_key, limits.window_secs).await?;
    let by_address = rate_limits::hit(&tx, &addr_key, limits.window_secs).await?;
    if by_email > limits.per_email || by_address > limits.per_address {
        return Err(Error::TooManyRequests {
            detail: "Too many messages in a short time; please wait a minute and try again."
                .to_owned(),
            retry_after: rate_limits::retry_after(limits.window_secs),
        });
    }
    insert(&tx, enquiry).await?;
    crate::db::commit(tx).await?;
    Ok(())
}
