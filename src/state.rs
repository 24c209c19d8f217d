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

pub struct AppState {
    pub pool: Pool,
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
