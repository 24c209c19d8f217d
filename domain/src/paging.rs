//! Paging: the `page`/`page_size` query parameters, the resolved page a
//! read takes, and the `{items, total, page, page_size}` answer. Shared by
//! the web layer (which parses and answers) and the reads (which page).

use serde::Deserialize;

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
