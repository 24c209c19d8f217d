//! Purchase orders: drafted, submitted, approved, sent, received against.
