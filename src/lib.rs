//! Pharmacy operations service: a back-office for multi-branch pharmacy
//! chains. See README.md for the architecture.

pub mod app;
pub mod auth;
pub mod config;
pub mod db;
pub mod devdb;
pub mod http;
pub mod seed;
pub mod state;
pub mod store;
pub mod telemetry;
