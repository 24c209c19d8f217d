//! The answers of pushed changes, as served, stored and replayed: the
//! documented types are the ones serialised. Fields are declared in the
//! order of their names, the order the answers were always written in.

use serde::{Deserialize, Serialize};

// A change the server applied; a replay answers the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AcceptedChange {
    pub client_mutation_id: String,
    /// Sales only: the branch invoice counter value.
    pub icv: Option<i64>,
    /// The record's id (a sale's id for a sale).
    pub id: String,
    /// Sales only.
    pub invoice_number: Option<String>,
}

// A change the server refused; a replay answers the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RejectedChange {
    pub client_mutation_id: String,
    /// `invalid`, `not_found`, `forbidden`, `refused`, `unsupported`,
    /// `conflict` or `idempotency_mismatch`.
    pub code: String,
    /// `conflict` only: the recorded conflict's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflict_id: Option<String>,
    /// `invalid` only, where one field is at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// A readable reason; for `conflict`, the conflict's id.
    pub message: String,
}

/// One change's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Accepted(AcceptedChange),
    Rejected(RejectedChange),
}

// The push answer: `accepted[]` and `rejected[]`, each entry exactly as
// first answered for its mutation id.
#[derive(Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PushAnswer {
    pub accepted: Vec<AcceptedChange>,
    pub rejected: Vec<RejectedChange>,
}

impl PushAnswer {
    pub(super) fn add(&mut self, answer: Answer) {
        match answer {
            Answer::Accepted(a) => self.accepted.push(a),
            Answer::Rejected(r) => self.rejected.push(r),
        }
    }
}

impl Answer {
    /// The `outcome` it is stored under in `push_mutations`.
    pub(super) fn outcome(&self) -> &'static str {
        match self {
            Answer::Accepted(_) => "accepted",
            Answer::Rejected(_) => "rejected",
        }
    }

    /// The stored text of the answer.
    pub(super) fn to_text(&self) -> serde_json::Result<String> {
        match self {
            Answer::Accepted(a) => serde_json::to_string(a),
            Answer::Rejected(r) => serde_json::to_string(r),
        }
    }

    /// A stored answer read back, by its stored outcome.
    pub(super) fn from_text(outcome: &str, text: &str) -> serde_json::Result<Answer> {
        Ok(match outcome {
            "accepted" => Answer::Accepted(serde_json::from_str(text)?),
            _ => Answer::Rejected(serde_json::from_str(text)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_serialise_as_they_always_were_and_read_back_the_same() {
        let accepted = Answer::Accepted(AcceptedChange {
            client_mutation_id: "m-1".to_owned(),
            icv: None,
            id: "c-1".to_owned(),
            invoice_number: None,
        });
        let text = accepted.to_text().unwrap();
        assert_eq!(
            text,
            r#"{"client_mutation_id":"m-1","icv":null,"id":"c-1","invoice_number":null}"#
        );
        assert_eq!(Answer::from_text("accepted", &text).unwrap(), accepted);
        let rejected = Answer::Rejected(RejectedChange {
            client_mutation_id: "m-2".to_owned(),
            code: "invalid".to_owned(),
            conflict_id: None,
            field: Some("payment_method".to_owned()),
            message: "no".to_owned(),
        });
        let text = rejected.to_text().unwrap();
        assert_eq!(
            text,
            r#"{"client_mutation_id":"m-2","code":"invalid","field":"payment_method","message":"no"}"#
        );
        assert_eq!(Answer::from_text("rejected", &text).unwrap(), rejected);
    }
}
