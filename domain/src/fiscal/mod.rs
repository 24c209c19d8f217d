//! Fiscal documents for the tax authority (URA's EFRIS): the outbox rows
//! written in the same transaction as what they fiscalise, the payloads in
//! EFRIS's field names, the system-to-system envelope, and the worker that
//! submits them.

pub mod client;
pub mod envelope;
pub mod metrics;
pub mod outbox;
pub mod payload;
pub mod read;
pub mod worker;

use serde::{Deserialize, Serialize};

/// What a document is, by the EFRIS interface that receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// An invoice (a sale).
    T109,
    /// A credit note application (an issued return).
    T110,
    /// A goods registration or change (a medicine).
    T130,
    /// A stock increase or decrease (a receipt, a write-off, a supplier
    /// return).
    T131,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::T109, Kind::T110, Kind::T130, Kind::T131];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::T109 => "T109",
            Kind::T110 => "T110",
            Kind::T130 => "T130",
            Kind::T131 => "T131",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The states of a document, in the order they are met.
pub const STATUSES: [&str; 6] = [
    "waiting",
    "pending",
    "submitting",
    "accepted",
    "retrying",
    "rejected",
];
