//! The medicine catalogue (organisation-wide) and its categories. Two read
//! shapes: the spec's single-read shape (prices as decimal strings, flags as
//! booleans, live stock) and the snapshot shape (numbers, 0/1 flags) that
//! sync payloads carry.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::extension::postgres::PgExpr;
use sea_query::{Cond, Expr, ExprTrait, Order, Query, SelectStatement};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::input::{self, max, Flag};
use crate::sync::changes::{self, Change, Op};
use crate::{db, wire, Error, Result};

use crate::audit;
use crate::paging::Page;
use crate::sync::synced;
use crate::users::escape_like;

mod categories;
pub mod committed;
mod model;
mod read;
mod write;

pub use categories::*;
pub use model::*;
pub use read::*;
pub use write::*;
