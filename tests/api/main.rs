//! Integration tests: the real HTTP app against a real PostgreSQL, one
//! database per test. One module per URL area.

// Tests fail loudly by design.
#![allow(clippy::unwrap_used)]

mod common;

mod actor_runtime;
mod auth;
mod branches;
mod coupons;
mod customers;
mod errors;
mod medicines;
mod migrations;
mod operations;
mod purchases;
mod sales;
mod seed;
mod sessions;
mod stockcount;
mod supplier_finance;
mod supplier_invoices;
mod suppliers;
mod transfers;
mod users;
