//! What every handler can reach: the pool, the actor registry, the config
//! and the token keys.

use std::sync::Arc;

use domain::actor_tuning::Runtime;
use domain::customers::PaymentDesk;
use domain::db::Pool;
use domain::sales::desk::SaleDesk;
use domain::sync::live::Live;
use domain::sync::push::PushDesk;
use domain::Registry;

use crate::auth::tokens::TokenKeys;
use crate::config::Config;
use domain::replica::{Reads, Replica};

pub struct AppState {
    pub pool: Pool,
    /// The read replica (`DATABASE_READ_URL`), if configured.
    pub replica: Option<Arc<Replica>>,
    pub actors: Arc<Registry>,
    /// Where `POST /sales` hands its sales (group commit per branch).
    pub sales: Arc<SaleDesk>,
    /// Where customer payments go (group commit per branch, like sales).
    pub payments: Arc<PaymentDesk>,
    /// Where devices' push batches hand their runs of sales (group commit
    /// per branch, across the branch's tills).
    pub pushes: Arc<PushDesk>,
    pub config: Arc<Config>,
    pub tokens: TokenKeys,
    /// The change feed's settled horizon and long-poll wake-ups.
    pub live: Arc<Live>,
}

impl AppState {
    /// The pools a lag-tolerant domain read chooses from (the replica while
    /// it is within its lag bound, else the primary). Which reads those are
    /// is the domain's decision: each such area's `connect` takes this.
    pub fn reads(&self) -> Reads<'_> {
        Reads {
            primary: &self.pool,
            replica: self.replica.as_deref(),
        }
    }

    /// The actor runtime of this process as the tuning use cases see it.
    pub fn runtime(&self) -> Runtime<'_> {
        let a = &self.config.actors;
        Runtime {
            pool: &self.pool,
            registry: &self.actors,
            sales: &self.sales,
            configured: self.config.branch_overrides(),
            branch_mailbox: a.branch_mailbox,
            device_mailbox: a.device_mailbox,
            overrides_reload_ms: a.overrides_reload_ms,
        }
    }
}
