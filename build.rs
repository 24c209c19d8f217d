//! Rebuilds the binary when a migration is added to `sql/`: the migrations
//! are embedded with `include_dir!`, which sees edits to known files but
//! not new ones.
fn main() {
    println!("cargo:rerun-if-changed=sql");
}
