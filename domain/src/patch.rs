//! A typed patch: the column values one write sets, checked by the
//! domain before it reaches SQL. Each table that takes patches has a column
//! enum (`#[derive(Iden)]`), so the columns are named once and a misspelt
//! one does not compile.

use sea_query::{DynIden, Iden, IntoIden, Value};

/// Column values of a write to one table, already validated. `C` is that
/// table's column enum: a misspelt column, or one of another table, does
/// not compile.
pub struct Patch<C>(Vec<(C, Value)>);

impl<C: Iden + Copy + 'static> Patch<C> {
    pub fn new() -> Self {
        Patch(Vec::new())
    }

    /// Sets `column` to `value` (the last set wins in SQL order, so set
    /// each column once).
    pub fn set(&mut self, column: C, value: impl Into<Value>) {
        self.0.push((column, value.into()));
    }

    /// A patch of one column.
    pub fn of(column: C, value: impl Into<Value>) -> Self {
        let mut p = Patch::new();
        p.set(column, value);
        p
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the patch sets `column`.
    pub fn sets(&self, column: C) -> bool {
        self.0
            .iter()
            .any(|(c, _)| c.unquoted() == column.unquoted())
    }

    /// The value the patch sets `column` to, if it does.
    pub fn get(&self, column: C) -> Option<&Value> {
        self.0
            .iter()
            .find(|(c, _)| c.unquoted() == column.unquoted())
            .map(|(_, v)| v)
    }

    /// Whether the patch sets a column named `name` (for the generic
    /// write paths, which add the columns every table of theirs has).
    pub fn names(&self, name: &str) -> bool {
        self.0.iter().any(|(c, _)| c.unquoted() == name)
    }

    /// The pairs as the query builder takes them.
    pub fn into_pairs(self) -> Vec<(DynIden, Value)> {
        self.0
            .into_iter()
            .map(|(c, v)| (c.into_iden(), v))
            .collect()
    }
}

impl<C: Iden + Copy + 'static> Default for Patch<C> {
    fn default() -> Self {
        Patch::new()
    }
}
