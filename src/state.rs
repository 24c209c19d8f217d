//! What every handler can reach: the pool, the actor registry, the config
//! and the token keys.

use std::sync::Arc;

use domain::customers::PaymentDesk;
use domain::db::Pool;
use domain::sales::desk::SaleDesk;
use domain::sync::live::Live;
use domain::Registry;

use crate::auth::tokens::TokenKeys;
use crate::config::Config;
use crate::db::replica::{Reads, Replica};

pub struct AppState {
    pub pool: Pool,
    /// The read replica (`DATABASE_READ_URL`), if configured.
    pub replica: Option<Arc<Replica>>,
    pub actors: Arc<Registry>,
    /// Where `POST /sales` hands its sales (group commit per branch).
    pub sales: Arc<SaleDesk>,
    /// Where customer payments go (group commit per branch, like sales).
    pub payments: Arc<PaymentDesk>,
    pub config: Arc<Config>,
    pub tokens: TokenKeys,
    /// The change feed's settled horizon and long-poll wake-ups.
    pub live: Arc<Live>,
}

impl AppState {
    /// Where the reads that may be a few seconds old go (reports, the
    /// dashboard, the compliance books and CSV exports, the sync snapshot):
    /// the replica while it is within its lag bound, else the primary.
    /// Anything else reads `pool`.
    pub fn reads(&self) -> Reads<'_> {
        Reads {
            primary: &self.pool,
            replica: self.replica.as_deref(),
        }
    }

    /// A connection for a lag-tolerant read (see [`AppState::reads`]).
    pub async fn read_client(&self) -> domain::Result<deadpool_postgres::Object> {
        self.reads().client().await
    }
}
