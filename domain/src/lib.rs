//! Everything the pharmacy service knows, one folder or file per area:
//! the entities, their reads, and the transactions the branch and device
//! actors run. Every invariant these transactions keep is also enforced by
//! the database (constraints, conditional updates, row locks), so two
//! server processes on one database stay correct.
//!
//! Shared by every area: the error type with its stable codes (`error`),
//! statement helpers (`db`), input validation (`input`), wire formats
//! (`wire`), paging (`paging`), report windows (`window`) and the role
//! policy (`role`). Nothing here knows about HTTP; the web layer (the
//! `pharmacy` crate) calls in, never the other way round.

// Shared
pub mod acting;
pub mod db;
pub mod error;
pub mod group_commit;
pub mod gs1;
pub mod idempotency;
pub mod input;
pub mod metrics;
pub mod paging;
pub mod patch;
pub mod replica;
pub mod role;
pub mod tables;
pub mod window;
pub mod wire;

// Catalogue and people
pub mod branches;
pub mod coupons;
pub mod currency;
pub mod customers;
pub mod marketing;
pub mod medicines;
pub mod packs;
pub mod settings;
pub mod suppliers;
pub mod users;

// Selling and dispensing
pub mod cash_sessions;
pub mod prescriptions;
pub mod printing;
pub mod returns;
pub mod sales;
pub mod scan;
pub mod will_call;

// Stock (receiving, counts, transfers inside), and write-offs
pub mod buying;
pub mod stock;
pub mod write_offs;

// Oversight: approvals, audit, books, reports, dashboard
pub mod approvals;
pub mod audit;
pub mod books;
pub mod dashboard;
pub mod fiscal;
pub mod reports;

// Sync for tills, and per-branch tuning of the actor runtime
pub mod actor_overrides;
pub mod actor_tuning;
pub mod sync;

pub use acting::Acting;
pub use error::{Error, Result};
pub use role::{Action, Role};

/// The actor runtime the domain's commands run on.
pub use actors::{ActorStats, BranchOverride, Command, Kind, Registry, RuntimeConfig};
