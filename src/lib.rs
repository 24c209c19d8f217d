//! Pharmacy operations service: a back-office for multi-branch pharmacy
//! chains. See docs/architecture.md for the architecture.

pub mod app;
pub mod auth;
pub mod bench;
pub mod config;
pub mod console;
pub mod csv_export;
pub mod db;
pub mod devdb;
pub mod fiscal;
pub mod fiscal_sim;
pub mod http;
pub mod maintenance;
pub mod seed;
pub mod seed_large;
pub mod state;
pub mod telemetry;
pub mod tuning;
