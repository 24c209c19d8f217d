//! Integration tests: the real HTTP app against a real PostgreSQL, one
//! database per test. One module per URL area.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::disallowed_methods,
    reason = "tests fail loudly by design, report their figures on stderr, and stage interleavings on raw sessions"
)]

mod common;

mod actor_runtime;
mod approvals;
mod audit_log;
mod auth;
mod branch_controls;
mod branches;
mod buying_flow;
mod compliance;
mod console;
mod console_browser;
mod console_buying;
mod console_buying_browser;
mod console_counter;
mod console_daily;
mod console_stock_moves;
mod console_suppliers;
mod console_terms;
mod coupons;
mod currency;
mod customers;
mod dashboard;
mod declared_limits;
mod devdb;
mod devices;
mod errors;
mod failover;
mod feed_epoch;
mod fiscal;
mod fuzz_bodies;
mod goods_received;
mod group_writer;
mod input_controls;
mod invoice_matching;
mod isolation;
mod layers;
mod limits;
mod marketing;
mod medicines;
mod migrations;
mod openapi_contract;
mod operations;
mod ops_actors;
mod pack_sales;
mod packs;
mod prescription_controls;
mod prescriptions;
mod printing;
mod problem_codes;
mod purchase_orders;
mod purchases;
mod push_groups;
mod read_replica;
mod receiving_packs;
mod report_summaries;
mod reports;
mod returns;
mod role_policy;
mod sales;
mod second_review;
mod seed;
mod sessions;
mod settings;
mod stock_value;
mod stockcount;
mod supplier_finance;
mod supplier_invoices;
mod supplier_returns;
mod suppliers;
mod sync_commit;
mod sync_feed;
mod sync_pull;
mod sync_push;
mod token_attacks;
mod token_lifetime;
mod transactions;
mod transfers;
mod users;
mod will_call;
mod write_offs;
