//! Integration tests: the real HTTP app against a real PostgreSQL, one
//! database per test. One module per URL area.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    reason = "tests fail loudly by design, and report their figures on stderr"
)]

mod common;

mod actor_runtime;
mod auth;
mod branches;
mod compliance;
mod coupons;
mod customers;
mod devdb;
mod devices;
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
mod sync_pull;
mod sync_push;
mod transfers;
mod users;
// Printing, settings, currency, audit log.
mod audit_log;
// Branch scope, bounded windows, CSV exports, session roles (issue 15).
mod branch_controls;
mod currency;
mod printing;
mod problem_codes;
// The role policy: one table, the README matrix rendered from it.
mod role_policy;
mod settings;
// Front desk (issue 6 items 6-9).
mod approvals;
mod marketing;
mod prescription_controls;
mod prescriptions;
mod will_call;
// Dashboard and reports (issue 7).
mod dashboard;
mod reports;
// Reliability and security (issue 9).
mod fuzz_bodies;
mod input_controls;
mod isolation;
mod limits;
mod openapi_contract;
mod ops_actors;
mod token_attacks;
mod token_lifetime;
