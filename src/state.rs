//! What every handler can reach: the pool, the actor registry, the config
//! and the token keys.

use std::sync::Arc;

use actors::db::Pool;
use actors::Registry;

use crate::auth::tokens::TokenKeys;
use crate::config::Config;

pub struct AppState {
    pub pool: Pool,
    pub actors: Arc<Registry>,
    pub config: Arc<Config>,
    pub tokens: TokenKeys,
}
