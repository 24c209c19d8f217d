//! A payment against a customer's balance as a client sends it, and its
//! checks of form (sign and size are judged against the balance in the
//! transaction, so the refusal can name both figures).

use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::balance::RecordPayment;
use crate::input;
use crate::users::sessions::Signer;
use crate::Result;

/// `POST /customers/{id}/payments` as a client sends it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct PaymentRequest {
    /// More than 0 and at most the current balance.
    #[schema(value_type = f64)]
    pub amount: Decimal,
    pub notes: Option<String>,
    /// Admins only: the branch taking the payment (default their own).
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    /// The client's id for this payment: a retry with the same id answers
    /// the first receipt (200, `Idempotent-Replay: true`) and pays nothing;
    /// the same id with another amount is 409.
    // Its bounds (not blank, `input::max::MUTATION_ID` characters) are
    // documented by the request rules, from the constant the check uses.
    pub client_mutation_id: Option<String>,
}

/// Who takes the payment, and where.
pub struct Taker {
    pub customer_id: Uuid,
    pub branch_id: Uuid,
    pub user_id: Uuid,
    pub signer: Option<Signer>,
}

impl PaymentRequest {
    /// Checks the payment's form for `taker`.
    pub fn validate(&self, taker: Taker) -> Result<RecordPayment> {
        input::amount("amount", self.amount.abs())?;
        Ok(RecordPayment {
            customer_id: taker.customer_id,
            branch_id: taker.branch_id,
            amount: self.amount.normalize(),
            notes: input::multiline(
                "notes",
                self.notes.as_deref().unwrap_or_default(),
                input::max::NOTES,
            )?,
            user_id: taker.user_id,
            client_mutation_id: self
                .client_mutation_id
                .as_deref()
                .map(|c| input::required_text("client_mutation_id", c, input::max::MUTATION_ID))
                .transpose()?,
            signer: taker.signer,
        })
    }
}
