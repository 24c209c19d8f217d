//! The write side of the pharmacy service: the actor runtime that serialises
//! per-branch and per-device mutations, and the transactions those actors run.
//! Every invariant these transactions keep is also enforced by the database
//! (constraints, conditional updates, row locks), so two server processes on
//! one database stay correct.

pub mod changes;
pub mod coupons;
pub mod customers;
pub mod db;
pub mod error;
pub mod input;
pub mod mailbox;
pub mod metrics;
pub mod paging;
pub mod purchases;
pub mod role;
pub mod runtime;
pub mod sale_desk;
pub mod sales;
pub mod sessions;
pub mod stock;
pub mod stockcount;
pub mod supplier_invoices;
pub mod transfers;
pub mod window;
pub mod wire;

pub use error::{Error, Result};
pub use role::{Action, Role};
pub use runtime::{ActorStats, BranchOverride, Kind};
pub use runtime::{Command, Registry, RuntimeConfig};
