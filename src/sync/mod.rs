//! Sync for tills, the write side: pushed changes applied in order with one
//! effect per mutation id, and the conflicts a stale push leaves behind.
//! (The read side, snapshot and change feed, reads the change log; see
//! `actors::changes`.)

pub mod conflicts;
pub mod entities;
pub mod push;
