//! The medicine catalogue (organisation-wide) and its categories. Two read
//! shapes: the spec's single-read shape (prices as decimal strings, flags as
//! booleans, live stock) and the snapshot shape (numbers, 0/1 flags) that
//! sync payloads carry.

mod categories;
pub mod committed;
mod model;
mod read;
mod write;

pub use categories::ensure_category;
pub use model::{Medicine, MedicineSnapshot, MedicineView, COLUMNS};
pub use read::{current, get, list, live_one, ListFilter};
pub use write::{
    check, create, edit, insert, remove, Fields, MedicineColumn, MedicineWrite, VAT_CATEGORIES,
};
