//! The web layer holds no use case: no SQL and no transaction under
//! `src/http` or `src/console` (every use case is a domain function), and
//! neither of the two imports the other (both call the domain). A line
//! that breaks this fails the test run, naming the file and the line.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What a line of the web layer must not contain: a transaction or a
/// statement of its own.
const USE_CASE_MARKS: [&str; 9] = [
    "transaction()",
    "raw_query!",
    "Query::select",
    "Query::insert",
    "Query::update",
    "Query::delete",
    ".execute(",
    "prepare_cached",
    "sea_query::",
];

/// The lines of `dir`'s files that contain one of `marks`, outside
/// comments, as `file:line: text`.
fn offending(dir: &str, marks: &[&str]) -> Vec<String> {
    let root = root();
    let mut files = Vec::new();
    sources(&root.join(dir), &mut files);
    assert!(!files.is_empty(), "no sources under {dir}");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if let Some(mark) = marks.iter().find(|m| code.contains(*m)) {
                let name = file.strip_prefix(&root).unwrap_or(file).display();
                found.push(format!("{name}:{}: `{mark}` in {}", n + 1, code.trim()));
            }
        }
    }
    found
}

#[test]
fn the_web_layer_writes_no_sql_and_opens_no_transaction() {
    let mut found = offending("src/http", &USE_CASE_MARKS);
    found.extend(offending("src/console", &USE_CASE_MARKS));
    assert!(
        found.is_empty(),
        "SQL or a transaction in the web layer; make it a domain function in \
         domain/src/<area>/ that the handler (and the console page) call:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_api_and_the_console_do_not_import_each_other() {
    let mut found = offending("src/console", &["crate::http"]);
    found.extend(offending("src/http", &["crate::console"]));
    assert!(
        found.is_empty(),
        "the console and the API handlers call the domain, not each other \
         (shared helpers go to a neutral module such as src/auth/):\n{}",
        found.join("\n")
    );
}
