//! Read queries and simple writes, built with sea-query, one module per area.

pub mod actor_overrides;
pub mod approvals;
pub mod audit;
pub mod auth_sessions;
pub mod books;
pub mod branches;
pub mod currency;
pub mod customers;
pub mod dashboard;
pub mod devices;
pub mod marketing;
pub mod medicines;
pub mod prescriptions;
pub mod printing;
pub mod rate_limits;
pub mod reports;
pub mod settings;
pub mod snapshot;
pub mod suppliers;
pub mod synced;
pub mod users;
pub mod will_call;
