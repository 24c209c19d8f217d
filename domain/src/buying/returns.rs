//! Supplier returns and their debit notes.
