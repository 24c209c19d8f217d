//! Read queries and simple writes, built with sea-query, one module per area.

pub mod audit;
pub mod branches;
pub mod customers;
pub mod medicines;
pub mod rate_limits;
pub mod suppliers;
pub mod synced;
pub mod users;
