//! Paging: the `page`/`page_size` query parameters, the resolved page a
//! read takes, and the `{items, total, page, page_size}` answer. Shared by
//! the web layer (which parses and answers) and the reads (which page).
//!
//! A paged read states its list once, as a select of its rows (FROM, joins,
//! WHERE), and asks [`fetch`] for a page of it and the list's total; a read
//! that loads its rows its own way counts with [`count`] and takes the page
//! with [`Slice::apply`].

use deadpool_postgres::GenericClient;
use sea_query::{Expr, IntoColumnRef, SelectStatement};
use serde::Deserialize;
use tokio_postgres::Row;

use crate::db;
use crate::error::{Error, Result};

/// `page` (1-based) and `page_size` (capped at 200).
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// 1-based page number (default 1, at most 1,000,000).
    #[param(minimum = 1, maximum = 1_000_000)]
    pub page: Option<i64>,
    /// Rows per page (default per list; values above 200 are capped at 200).
    #[param(minimum = 1)]
    pub page_size: Option<i64>,
}

pub const MAX_PAGE_SIZE: i64 = 200;

#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub page: i64,
    pub page_size: i64,
}

impl Page {
    pub fn offset(&self) -> u64 {
        ((self.page - 1) * self.page_size) as u64
    }
    pub fn limit(&self) -> u64 {
        self.page_size as u64
    }
}

/// Which rows of a list a read takes: a [`Page`], every row (`None`), or
/// an offset and a limit (`Some((offset, limit))`).
pub trait Slice {
    /// `(offset, limit)`, or `None` for every row.
    fn bounds(&self) -> Option<(u64, u64)>;

    /// Sets the statement's offset and limit (nothing for every row).
    fn apply(&self, q: &mut SelectStatement) {
        if let Some((offset, limit)) = self.bounds() {
            q.offset(offset).limit(limit);
        }
    }
}

impl Slice for Page {
    fn bounds(&self) -> Option<(u64, u64)> {
        Some((self.offset(), self.limit()))
    }
}

impl Slice for Option<Page> {
    fn bounds(&self) -> Option<(u64, u64)> {
        self.as_ref().and_then(Slice::bounds)
    }
}

impl Slice for Option<(u64, u64)> {
    fn bounds(&self) -> Option<(u64, u64)> {
        *self
    }
}

/// How many rows `list` (FROM, joins and WHERE) selects, counting
/// `counted`; columns `list` already selects are left out of the count.
pub async fn count<C: GenericClient + Sync>(
    c: &C,
    list: &SelectStatement,
    counted: impl IntoColumnRef,
) -> Result<i64> {
    // In here only: it would give `i64` a second `min`.
    use sea_query::ExprTrait;
    let q = list
        .clone()
        .clear_selects()
        .expr(Expr::col(counted).count())
        .to_owned();
    Ok(db::fetch_one(c, &q).await?.get(0))
}

/// A slice of a list's rows and the list's total: `list` is the list
/// (FROM, joins and WHERE), counted by `counted`; `shape` adds the columns
/// and the order of the rows read, and `slice` takes the page.
pub async fn fetch<C: GenericClient + Sync>(
    c: &C,
    list: SelectStatement,
    counted: impl IntoColumnRef,
    slice: impl Slice,
    shape: impl FnOnce(&mut SelectStatement),
) -> Result<(Vec<Row>, i64)> {
    let total = count(c, &list, counted).await?;
    let mut q = list;
    shape(&mut q);
    slice.apply(&mut q);
    Ok((db::fetch_all(c, &q).await?, total))
}

impl PageParams {
    pub fn resolve(&self, default_size: i64) -> Result<Page> {
        let page = self.page.unwrap_or(1);
        if page < 1 {
            return Err(Error::validation("page", "`page` must be 1 or more."));
        }
        let page_size = self.page_size.unwrap_or(default_size);
        if page_size < 1 {
            return Err(Error::validation(
                "page_size",
                "`page_size` must be 1 or more.",
            ));
        }
        if page > 1_000_000 {
            return Err(Error::validation("page", "`page` is too large."));
        }
        Ok(Page {
            page,
            page_size: page_size.min(MAX_PAGE_SIZE),
        })
    }
}

/// A paged list: `{items, total, page, page_size}`. One generic schema
/// for every list (see the `ToSchema` impl below).
#[derive(Debug, serde::Serialize)]
pub struct Paged<T> {
    pub items: Vec<T>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
}

/// The schema of a page of `T`: the document names each use after its
/// items (`Paged_CustomerView`, ...) and refers to the item schema by name
/// (the derived schema would copy it inline into every page).
impl<T: utoipa::ToSchema> utoipa::__dev::ComposeSchema for Paged<T> {
    fn compose(
        _: Vec<utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>>,
    ) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{
            ArrayBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type,
        };
        let count = || {
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        };
        ObjectBuilder::new()
            .property(
                "items",
                ArrayBuilder::new().items(utoipa::openapi::Ref::from_schema_name(T::name())),
            )
            .required("items")
            .property("total", count())
            .required("total")
            .property("page", count())
            .required("page")
            .property("page_size", count())
            .required("page_size")
            .into()
    }
}

impl<T: utoipa::ToSchema> utoipa::ToSchema for Paged<T> {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("Paged")
    }

    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        schemas.push((T::name().into_owned(), T::schema()));
        T::schemas(schemas);
    }
}

impl<T> Paged<T> {
    pub fn new(items: Vec<T>, total: i64, page: Page) -> Self {
        Paged {
            items,
            total,
            page: page.page,
            page_size: page.page_size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Page, Slice};

    #[test]
    fn a_slice_is_a_page_all_rows_or_an_offset_and_a_limit() {
        let third = Page {
            page: 3,
            page_size: 20,
        };
        assert_eq!(third.bounds(), Some((40, 20)));
        assert_eq!(Some(third).bounds(), Some((40, 20)));
        assert_eq!(None::<Page>.bounds(), None);
        assert_eq!(Some((5, 7)).bounds(), Some((5, 7)));
        assert_eq!(None::<(u64, u64)>.bounds(), None);
    }
}
