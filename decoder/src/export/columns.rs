//! A Parquet table written in row groups through the `parquet` crate's low-level column writers
//! (no Arrow): rows are buffered per column and flushed every [`ROW_GROUP_ROWS`] rows, so memory
//! is bounded by one row group per table.

use crate::output::OutputFile;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

/// Rows per row group.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// Physical type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
    I64,
    I32,
    F64,
    Str,
    /// Nullable INT32 (rank, device of process-wide counters).
    OptI32,
}

enum Col {
    I64(Vec<i64>),
    I32(Vec<i32>),
    F64(Vec<f64>),
    Str(Vec<ByteArray>),
    OptI32(Vec<i32>, Vec<i16>),
}

/// One Parquet file being written.
pub struct Table {
    pub path: PathBuf,
    writer: Option<SerializedFileWriter<OutputFile>>,
    cols: Vec<Col>,
    buffered: usize,
    pub rows: u64,
}

impl Table {
    pub fn create(path: &Path, name: &str, schema: &[(&str, ColType)]) -> Result<Table, ParquetError> {
        let fields: Vec<String> = schema
            .iter()
            .map(|(n, t)| match t {
                ColType::I64 => format!("REQUIRED INT64 {n};"),
                ColType::I32 => format!("REQUIRED INT32 {n};"),
                ColType::F64 => format!("REQUIRED DOUBLE {n};"),
                ColType::Str => format!("REQUIRED BYTE_ARRAY {n} (UTF8);"),
                ColType::OptI32 => format!("OPTIONAL INT32 {n};"),
            })
            .collect();
        let message = format!("message {name} {{ {} }}", fields.join(" "));
        let schema_type = Arc::new(parse_message_type(&message)?);
        let props = Arc::new(WriterProperties::builder().set_compression(Compression::SNAPPY).build());
        let writer = SerializedFileWriter::new(crate::output::create_file(path)?, schema_type, props)?;
        let cols = schema
            .iter()
            .map(|(_, t)| match t {
                ColType::I64 => Col::I64(Vec::new()),
                ColType::I32 => Col::I32(Vec::new()),
                ColType::F64 => Col::F64(Vec::new()),
                ColType::Str => Col::Str(Vec::new()),
                ColType::OptI32 => Col::OptI32(Vec::new(), Vec::new()),
            })
            .collect();
        Ok(Table { path: path.to_path_buf(), writer: Some(writer), cols, buffered: 0, rows: 0 })
    }

    /// Append one row: `f` sets every column in schema order.
    pub fn row(&mut self, f: impl FnOnce(&mut Row)) -> Result<(), ParquetError> {
        let mut r = Row { cols: &mut self.cols, at: 0 };
        f(&mut r);
        debug_assert_eq!(r.at, self.cols.len(), "{}: a row must set every column", self.path.display());
        self.buffered += 1;
        self.rows += 1;
        if self.buffered >= ROW_GROUP_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    /// Write the buffered rows as one row group.
    pub fn flush(&mut self) -> Result<(), ParquetError> {
        if self.buffered == 0 {
            return Ok(());
        }
        let writer = self.writer.as_mut().ok_or_else(|| ParquetError::General("table closed".into()))?;
        let mut rg = writer.next_row_group()?;
        let mut i = 0;
        while let Some(mut cw) = rg.next_column()? {
            match &mut self.cols[i] {
                Col::I64(v) => {
                    cw.typed::<Int64Type>().write_batch(v, None, None)?;
                    v.clear();
                }
                Col::I32(v) => {
                    cw.typed::<Int32Type>().write_batch(v, None, None)?;
                    v.clear();
                }
                Col::F64(v) => {
                    cw.typed::<DoubleType>().write_batch(v, None, None)?;
                    v.clear();
                }
                Col::Str(v) => {
                    cw.typed::<ByteArrayType>().write_batch(v, None, None)?;
                    v.clear();
                }
                Col::OptI32(v, defs) => {
                    cw.typed::<Int32Type>().write_batch(v, Some(defs), None)?;
                    v.clear();
                    defs.clear();
                }
            }
            cw.close()?;
            i += 1;
        }
        rg.close()?;
        self.buffered = 0;
        Ok(())
    }

    /// Flush and write the footer.
    pub fn close(&mut self) -> Result<(), ParquetError> {
        self.flush()?;
        if let Some(w) = self.writer.take() {
            w.into_inner()?.commit()?;
        }
        Ok(())
    }
}

/// Setter for the columns of one row, in schema order.
pub struct Row<'a> {
    cols: &'a mut [Col],
    at: usize,
}

impl Row<'_> {
    fn next(&mut self) -> &mut Col {
        let i = self.at;
        self.at += 1;
        &mut self.cols[i]
    }

    pub fn i64(&mut self, v: i64) -> &mut Self {
        match self.next() {
            Col::I64(c) => c.push(v),
            _ => panic!("column {} is not INT64", self.at - 1),
        }
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.i64(v as i64)
    }

    pub fn i32(&mut self, v: i32) -> &mut Self {
        match self.next() {
            Col::I32(c) => c.push(v),
            _ => panic!("column {} is not INT32", self.at - 1),
        }
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.i32(v as i32)
    }

    pub fn f64(&mut self, v: f64) -> &mut Self {
        match self.next() {
            Col::F64(c) => c.push(v),
            _ => panic!("column {} is not DOUBLE", self.at - 1),
        }
        self
    }

    pub fn str(&mut self, v: ByteArray) -> &mut Self {
        match self.next() {
            Col::Str(c) => c.push(v),
            _ => panic!("column {} is not a string", self.at - 1),
        }
        self
    }

    pub fn opt_i32(&mut self, v: Option<i32>) -> &mut Self {
        match self.next() {
            Col::OptI32(c, d) => {
                d.push(v.is_some() as i16);
                if let Some(v) = v {
                    c.push(v);
                }
            }
            _ => panic!("column {} is not a nullable INT32", self.at - 1),
        }
        self
    }
}
