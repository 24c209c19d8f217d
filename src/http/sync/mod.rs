//! `/sync`: what tills pull (snapshot, change feed), what they push, and the
//! conflicts a push can leave for head office to resolve.

pub mod conflicts;
pub mod pull;
pub mod push;

use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    pull::configure(cfg);
    push::configure(cfg);
    conflicts::configure(cfg);
}
