//! `/problems/<code>`: the page a problem body's `type` points to, one short
//! human page per stable code (the list is `domain::error::Code`).

use actix_web::{web, HttpResponse};
use domain::error::Code;
use domain::{Error, Result};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/problems", web::get().to(index))
        .route("/problems/{code}", web::get().to(page));
}

async fn index() -> HttpResponse {
    let rows: String = Code::ALL
        .iter()
        .map(|c| {
            format!(
                "<tr><td><a href=\"/problems/{code}\"><code>{code}</code></a></td><td>{status}</td><td>{meaning}</td></tr>\n",
                code = c.as_str(),
                status = status_text(*c),
                meaning = c.meaning()
            )
        })
        .collect();
    html(
        "Problem codes",
        &format!(
            "<p>Every error body of the API carries one of these codes in <code>code</code>.</p>\n\
             <table>\n<tr><th>code</th><th>status</th><th>meaning</th></tr>\n{rows}</table>"
        ),
    )
}

async fn page(code: web::Path<String>) -> Result<HttpResponse> {
    let code = Code::parse(&code).ok_or_else(|| Error::not_found("No such problem code."))?;
    Ok(html(
        code.as_str(),
        &format!(
            "<p>Status: {}</p>\n<p>{}</p>\n<p><a href=\"/problems\">All problem codes</a></p>",
            status_text(code),
            code.meaning()
        ),
    ))
}

fn status_text(code: Code) -> String {
    match code.status() {
        0 => "sync push rejection only".to_owned(),
        n => n.to_string(),
    }
}

fn html(title: &str, body: &str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>{title}</title></head>\n<body>\n<h1>{title}</h1>\n{body}\n</body></html>\n"
        ))
}
