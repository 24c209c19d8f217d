use actix_web::web;

pub fn configure(_cfg: &mut web::ServiceConfig) {}
