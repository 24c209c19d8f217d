//! The feed's epoch: which history of the database a till's cursor counts
//! revs in.
//!
//! Revs are only comparable within one history. An asynchronous failover
//! promotes a standby that may lack the old primary's last writes, and a
//! restore from backup goes back in time: in both the sequence hands out
//! again revs that tills have already passed, and a till that kept its
//! cursor would never see the changes that reuse them. So the feed names the
//! history its revs belong to, and a cursor of another history (or ahead of
//! the head) is answered 409 `resnapshot`.
//!
//! The epoch is PostgreSQL's own identity of that history: the cluster's
//! system identifier (new with every `initdb`, so a logical restore into a
//! new cluster changes it) and the timeline the primary writes on (a
//! promotion, whether Patroni's failover or the end of a point-in-time
//! recovery from a base backup, starts a new one). Both are read on the
//! connection that reads the revs, in the same statement (`horizon::look`,
//! the snapshot's first read), never cached: a connection made after a
//! failover reaches the new primary, and the very read that could see
//! renumbered revs is the one that names their epoch. The system identifier
//! comes from `pg_control_system()`; the timeline from the name of the WAL
//! file being written (`pg_walfile_name`), which follows the promotion at
//! once (`pg_control_checkpoint()` only after the next checkpoint). A
//! standby has no timeline of its own to offer: it reads as `None`, and its
//! reads carry the primary's epoch (`replica.rs`).

use tokio_postgres::Row;

/// The select-list columns that read the identity (`system_id`, `timeline`);
/// a statement selecting them must go through `Identity::from_row`.
pub const COLUMNS: &str = "(SELECT system_identifier FROM pg_control_system())::text AS system_id,
       CASE WHEN pg_is_in_recovery() THEN NULL
            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int
       END AS timeline";

/// What a server says about its history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub system_id: String,
    /// `None` on a standby (recovery in progress).
    pub timeline: Option<i32>,
}

impl Identity {
    /// The identity from a row that selected `COLUMNS`.
    pub fn from_row(row: &Row) -> Identity {
        Identity {
            system_id: row.get("system_id"),
            timeline: row.get("timeline"),
        }
    }

    /// The epoch tills carry, on a primary: `<system id>-<timeline>`.
    /// Opaque to tills: they only compare it and send it back.
    pub fn epoch(&self) -> Option<String> {
        self.timeline.map(|t| format!("{}-{t}", self.system_id))
    }
}

/// The system identifier part of an epoch.
pub fn system_id_of(epoch: &str) -> &str {
    epoch.split_once('-').map_or(epoch, |(s, _)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primary_names_its_system_and_timeline_and_a_standby_nothing() {
        let primary = Identity {
            system_id: "7712424261034331477".to_owned(),
            timeline: Some(2),
        };
        assert_eq!(primary.epoch().as_deref(), Some("7712424261034331477-2"));
        assert_eq!(system_id_of("7712424261034331477-2"), "7712424261034331477");
        let standby = Identity {
            timeline: None,
            ..primary
        };
        assert_eq!(standby.epoch(), None);
    }
}
