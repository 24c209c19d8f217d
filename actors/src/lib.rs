//! The actor runtime: a serialising actor per key (a branch or a device),
//! a registry that starts them on first use, bounded mailboxes whose
//! capacity operators tune per branch, and their metrics. It knows nothing
//! of pharmacies: the domain crate defines the commands and runs them here.

pub mod mailbox;
pub mod metrics;
pub mod runtime;

pub use runtime::{ActorStats, BranchOverride, Kind, Refused};
pub use runtime::{Command, Registry, RuntimeConfig};
