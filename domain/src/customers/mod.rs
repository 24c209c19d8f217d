//! Customers (organisation-wide): their records, and their balances with
//! the ledger that explains every movement.

mod balance;
pub mod committed;
mod payments;
mod records;
mod request;

pub use balance::{
    charge, get, pay, refund, Customer, CustomerView, LedgerRow, PaymentReceipt, RecordPayment,
    COLUMNS,
};
pub use payments::{PaymentDesk, Payments};
pub use records::{
    check_credit_edit, create, edit, fields, insert, ledger, list, remove, CustomerColumn,
    CustomerWrite, Fields,
};
pub use request::{PaymentRequest, Taker};
