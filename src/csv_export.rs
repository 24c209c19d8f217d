//! CSV exports. Every CSV the service writes goes through [`to_csv`], which
//! neutralises spreadsheet formulas (OWASP's CSV-injection rule): a text
//! cell that begins with `=`, `+`, `-`, `@`, a tab, a carriage return (or a
//! line feed or NUL, which some spreadsheets also strip before evaluating)
//! is written with a single quote in front, so a spreadsheet shows it as
//! text instead of running it.
//!
//! Which cells: every cell a row serialises as text (names, numbers typed
//! by users, ids, timestamps, money rendered as a decimal string) is
//! neutralised. Cells the row serialises as numbers or booleans (counts,
//! quantities, money as a number) are the service's own figures and are
//! written as they are, so `-5` stays a number a spreadsheet can add up; a
//! number can never carry a formula.

use std::borrow::Cow;
use std::fmt::Display;

use serde::ser::{self, Impossible, Serialize, SerializeStruct, Serializer};

use domain::{Error, Result};

/// The first characters that make a spreadsheet read a cell as a formula.
pub const FORMULA_TRIGGERS: [char; 8] = ['=', '+', '-', '@', '\t', '\r', '\n', '\0'];

/// One text cell, neutralised: a leading formula trigger gets a single
/// quote in front; anything else is returned unchanged.
pub fn neutralise(cell: &str) -> Cow<'_, str> {
    if cell.starts_with(FORMULA_TRIGGERS) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// Rows as CSV: a header row of the field names (also when there are no
/// rows: then the names come from `T::default()`), then one line per row,
/// every text cell neutralised. Rows must be flat structs of scalars.
pub fn to_csv<T: Serialize + Default>(rows: &[T]) -> Result<Vec<u8>> {
    let mut out = csv::Writer::from_writer(Vec::new());
    let header = match rows.first() {
        Some(first) => record(first)?,
        None => record(&T::default())?,
    };
    out.write_record(header.iter().map(|(name, _)| *name))
        .map_err(Error::internal)?;
    for row in rows {
        let cells = record(row)?;
        out.write_record(cells.iter().map(|(_, cell)| cell.as_bytes()))
            .map_err(Error::internal)?;
    }
    out.into_inner().map_err(Error::internal)
}

/// A row's cells with their field names, in field order, text neutralised.
fn record<T: Serialize>(row: &T) -> Result<Vec<(&'static str, String)>> {
    row.serialize(RowSer::default())
        .map_err(|e| Error::internal(format!("CSV row: {e}")))
}

#[derive(Debug)]
struct CsvError(String);

impl Display for CsvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CsvError {}

impl ser::Error for CsvError {
    fn custom<M: Display>(msg: M) -> Self {
        CsvError(msg.to_string())
    }
}

fn unsupported<T>(what: &str) -> std::result::Result<T, CsvError> {
    Err(CsvError(format!("a CSV row cannot hold {what}")))
}

/// Serialises one row (a struct) into named cells.
#[derive(Default)]
struct RowSer {
    cells: Vec<(&'static str, String)>,
}

impl SerializeStruct for RowSer {
    type Ok = Vec<(&'static str, String)>;
    type Error = CsvError;

    fn serialize_field<V: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &V,
    ) -> std::result::Result<(), CsvError> {
        let cell = value.serialize(CellSer)?;
        self.cells.push((key, cell));
        Ok(())
    }

    fn end(self) -> std::result::Result<Self::Ok, CsvError> {
        Ok(self.cells)
    }
}

type RowResult = std::result::Result<Vec<(&'static str, String)>, CsvError>;
type Never = Impossible<Vec<(&'static str, String)>, CsvError>;

macro_rules! row_rejects {
    ($($name:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $name(self, $(_: $arg),*) -> RowResult { unsupported("a bare value") })*
    };
}

impl Serializer for RowSer {
    type Ok = Vec<(&'static str, String)>;
    type Error = CsvError;
    type SerializeSeq = Never;
    type SerializeTuple = Never;
    type SerializeTupleStruct = Never;
    type SerializeTupleVariant = Never;
    type SerializeMap = Never;
    type SerializeStruct = Self;
    type SerializeStructVariant = Never;

    fn serialize_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> std::result::Result<Self, CsvError> {
        Ok(RowSer {
            cells: Vec::with_capacity(len),
        })
    }

    row_rejects!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(&'static str),
        serialize_unit_variant(&'static str, u32, &'static str),
    );

    fn serialize_some<V: ?Sized + Serialize>(self, _: &V) -> RowResult {
        unsupported("a bare value")
    }
    fn serialize_newtype_struct<V: ?Sized + Serialize>(
        self,
        _: &'static str,
        value: &V,
    ) -> RowResult {
        value.serialize(self)
    }
    fn serialize_newtype_variant<V: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &V,
    ) -> RowResult {
        unsupported("an enum")
    }
    fn serialize_seq(self, _: Option<usize>) -> std::result::Result<Never, CsvError> {
        unsupported("a list")
    }
    fn serialize_tuple(self, _: usize) -> std::result::Result<Never, CsvError> {
        unsupported("a tuple")
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<Never, CsvError> {
        unsupported("a tuple")
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<Never, CsvError> {
        unsupported("an enum")
    }
    fn serialize_map(self, _: Option<usize>) -> std::result::Result<Never, CsvError> {
        unsupported("a map")
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<Never, CsvError> {
        unsupported("an enum")
    }
}

/// Serialises one field's value into its cell text.
struct CellSer;

type CellResult = std::result::Result<String, CsvError>;
type NoCell = Impossible<String, CsvError>;

/// Numbers and booleans: the service's own figures, written as they are.
macro_rules! cell_plain {
    ($($name:ident($arg:ty)),* $(,)?) => {
        $(fn $name(self, v: $arg) -> CellResult { Ok(v.to_string()) })*
    };
}

impl Serializer for CellSer {
    type Ok = String;
    type Error = CsvError;
    type SerializeSeq = NoCell;
    type SerializeTuple = NoCell;
    type SerializeTupleStruct = NoCell;
    type SerializeTupleVariant = NoCell;
    type SerializeMap = NoCell;
    type SerializeStruct = NoCell;
    type SerializeStructVariant = NoCell;

    cell_plain!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_f32(f32),
        serialize_f64(f64),
    );

    fn serialize_char(self, v: char) -> CellResult {
        Ok(neutralise(v.encode_utf8(&mut [0; 4])).into_owned())
    }
    fn serialize_str(self, v: &str) -> CellResult {
        Ok(neutralise(v).into_owned())
    }
    fn serialize_bytes(self, _: &[u8]) -> CellResult {
        unsupported("bytes")
    }
    fn serialize_none(self) -> CellResult {
        Ok(String::new())
    }
    fn serialize_some<V: ?Sized + Serialize>(self, value: &V) -> CellResult {
        value.serialize(self)
    }
    fn serialize_unit(self) -> CellResult {
        Ok(String::new())
    }
    fn serialize_unit_struct(self, _: &'static str) -> CellResult {
        Ok(String::new())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> CellResult {
        Ok(neutralise(variant).into_owned())
    }
    fn serialize_newtype_struct<V: ?Sized + Serialize>(
        self,
        _: &'static str,
        value: &V,
    ) -> CellResult {
        value.serialize(self)
    }
    fn serialize_newtype_variant<V: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &V,
    ) -> CellResult {
        unsupported("an enum in a cell")
    }
    fn serialize_seq(self, _: Option<usize>) -> std::result::Result<NoCell, CsvError> {
        unsupported("a list in a cell")
    }
    fn serialize_tuple(self, _: usize) -> std::result::Result<NoCell, CsvError> {
        unsupported("a tuple in a cell")
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<NoCell, CsvError> {
        unsupported("a tuple in a cell")
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<NoCell, CsvError> {
        unsupported("an enum in a cell")
    }
    fn serialize_map(self, _: Option<usize>) -> std::result::Result<NoCell, CsvError> {
        unsupported("a map in a cell")
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> std::result::Result<NoCell, CsvError> {
        unsupported("a struct in a cell")
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<NoCell, CsvError> {
        unsupported("an enum in a cell")
    }
}

#[cfg(test)]
// Tests fail loudly by design.
#[allow(clippy::unwrap_used)]
mod tests {
    use std::borrow::Cow;

    use super::{neutralise, to_csv};

    #[test]
    fn every_formula_trigger_is_quoted() {
        for lead in ["=", "+", "-", "@", "\t", "\r", "\n", "\0"] {
            let cell = format!("{lead}cmd|' /C calc'!A0");
            assert_eq!(neutralise(&cell), format!("'{cell}"), "{lead:?}");
        }
        assert_eq!(
            neutralise("=HYPERLINK(\"http://x\")"),
            "'=HYPERLINK(\"http://x\")"
        );
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        for cell in [
            "",
            "Jane Doe",
            "0123",
            " =1+1",
            "a=b",
            "'=already",
            "Ünïcode",
            "2026-03-09T10:00:00.000Z",
        ] {
            assert!(matches!(neutralise(cell), Cow::Borrowed(_)), "{cell:?}");
        }
    }

    #[derive(Default, serde::Serialize)]
    struct Row {
        name: String,
        quantity: i32,
        price: f64,
        note: Option<String>,
        flag: bool,
    }

    fn text(rows: &[Row]) -> String {
        String::from_utf8(to_csv(rows).unwrap()).unwrap()
    }

    #[test]
    fn text_cells_are_neutralised_numbers_are_not() {
        let rows = [
            Row {
                name: "=cmd|' /C calc'!A0".into(),
                quantity: -5,
                price: -5.5,
                note: Some("-2+3".into()),
                flag: true,
            },
            Row {
                name: "Jane, Doe".into(),
                quantity: 2,
                price: 1.0,
                note: None,
                flag: false,
            },
        ];
        assert_eq!(
            text(&rows),
            "name,quantity,price,note,flag\n\
             '=cmd|' /C calc'!A0,-5,-5.5,'-2+3,true\n\
             \"Jane, Doe\",2,1,,false\n"
        );
    }

    #[test]
    fn no_rows_still_have_the_header() {
        assert_eq!(text(&[]), "name,quantity,price,note,flag\n");
    }

    #[test]
    fn quoting_survives_neutralising() {
        let rows = [Row {
            name: "@SUM(\"a\",1)\r\nnext".into(),
            ..Row::default()
        }];
        let out = text(&rows);
        let mut reader = csv::Reader::from_reader(out.as_bytes());
        let got: Vec<String> = reader
            .records()
            .map(|r| r.unwrap().get(0).unwrap().to_owned())
            .collect();
        assert_eq!(got, vec!["'@SUM(\"a\",1)\r\nnext".to_owned()]);
    }

    #[test]
    fn nested_values_are_refused_not_written() {
        #[derive(Default, serde::Serialize)]
        struct Bad {
            items: Vec<i32>,
        }
        assert!(to_csv(&[Bad { items: vec![1] }]).is_err());
    }
}
