//! Buying: purchase orders approved before they are sent (`orders`), goods
//! received against them with landed costs (`received`), and stock sent
//! back to the supplier for a debit note (`returns`). Invoices matched
//! against receipts live with the supplier invoices (`suppliers::invoices`).

pub mod orders;
pub mod received;
pub mod returns;
