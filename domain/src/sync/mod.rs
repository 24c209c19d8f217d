//! Sync for tills, all of it in one place: the change log every write
//! appends to (`changes`), the snapshot and change feed tills read (cut at
//! the settled `horizon`, kept `live` for long polls, which a commit wakes
//! together and which read together: `shared_feed`), the
//! devices they register, pushed changes applied in order with one effect
//! per mutation id (`push`, counted in `metrics`), and the conflicts a
//! stale push leaves behind; the `epoch` that tells a till its cursor
//! belongs to a database history that is gone.

pub mod changes;
pub mod conflicts;
pub mod devices;
pub mod entities;
pub mod epoch;
pub mod horizon;
pub mod live;
pub mod metrics;
pub mod push;
pub mod shared_feed;
pub mod snapshot;
pub mod synced;
