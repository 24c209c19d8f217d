//! Customers (organisation-wide): their records, and their balances with
//! the ledger that explains every movement.

mod balance;
pub mod committed;
mod payments;
mod records;

pub use balance::*;
pub use payments::{PaymentDesk, Payments};
pub use records::*;
