//! The conformance description of this crate: every C constant, record layout and API version it
//! declares, under its C name, so that a test can compare each one with NVIDIA's own headers
//! (`tests/real_headers.rs` compiles a C program against every installed CUPTI and compares).
//!
//! The declaring macros below write the Rust item and its table entry from one source, so nothing
//! declared through them can be left out of the check.

/// A C enumerator (or macro) and the value this crate gives it.
#[derive(Clone, Copy, Debug)]
pub struct CConstant {
    pub name: &'static str,
    pub value: i64,
}

/// The C structs a Rust record type stands for.
#[derive(Clone, Copy, Debug)]
pub enum CTypes {
    /// One unversioned struct.
    Exact(&'static str),
    /// `base` (version 1), `base2`, `base3`, ...: every version from `first` to the newest one a
    /// header declares.
    Versions { base: &'static str, first: u32 },
}

/// How much of the C struct a Rust record type declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coverage {
    /// The whole struct: sizes must agree too.
    Whole,
    /// The leading fields: the C struct is at least as large.
    Prefix,
}

/// One field of a Rust record type, by its C name.
#[derive(Clone, Copy, Debug)]
pub struct CField {
    pub rust_name: &'static str,
    pub c_name: &'static str,
    pub offset: usize,
    pub size: usize,
}

/// A Rust record type and the C structs it mirrors.
#[derive(Clone, Copy, Debug)]
pub struct CRecord {
    pub rust_name: &'static str,
    pub c_types: CTypes,
    pub coverage: Coverage,
    pub size: usize,
    pub fields: &'static [CField],
}

/// A field this crate reads at a fixed offset beyond a prefix (newer record versions only).
#[derive(Clone, Copy, Debug)]
pub struct CFieldAt {
    pub rust_name: &'static str,
    pub c_types: CTypes,
    pub c_name: &'static str,
    pub offset: usize,
    pub size: usize,
}

/// A `cuptiGetVersion` value and the toolkit release `cupti_version.h` documents it for
/// ("12.9", "12.9 Update 1", "13.0").
#[derive(Clone, Copy, Debug)]
pub struct CApiVersion {
    pub rust_name: &'static str,
    pub toolkit: &'static str,
    pub value: u32,
}

/// Declares `pub const` C constants and a table of them (`$table`) for the header check.
macro_rules! c_constants {
    ($(#[$tm:meta])* $table:ident; $( $(#[$m:meta])* $name:ident: $ty:ty = $val:expr; )*) => {
        $( $(#[$m])* pub const $name: $ty = $val; )*
        $(#[$tm])*
        pub const $table: &[$crate::abi::CConstant] =
            &[ $( $crate::abi::CConstant { name: stringify!($name), value: $name as i64 } ),* ];
    };
}

/// Declares a `#[repr(C)]` record type whose fields name their C fields (`=> "cName"`), and its
/// `C_LAYOUT` (offsets and sizes from the compiler) for the header check.
macro_rules! c_record {
    (
        $coverage:ident, $c_types:expr;
        $(#[$m:meta])*
        pub struct $name:ident {
            $( $(#[$fm:meta])* pub $field:ident: $fty:ty => $c_field:literal, )*
        }
    ) => {
        $(#[$m])*
        #[repr(C)]
        pub struct $name { $( $(#[$fm])* pub $field: $fty, )* }

        impl $name {
            /// The C structs this type mirrors and its fields by their C names.
            pub const C_LAYOUT: $crate::abi::CRecord = $crate::abi::CRecord {
                rust_name: stringify!($name),
                c_types: $c_types,
                coverage: $crate::abi::Coverage::$coverage,
                size: core::mem::size_of::<$name>(),
                fields: &[ $( $crate::abi::CField {
                    rust_name: stringify!($field),
                    c_name: $c_field,
                    offset: core::mem::offset_of!($name, $field),
                    size: core::mem::size_of::<$fty>(),
                } ),* ],
            };
        }
    };
}

/// Declares `pub const` API version values and their table.
macro_rules! c_api_versions {
    ($(#[$tm:meta])* $table:ident; $( $(#[$m:meta])* $name:ident = $val:literal for $toolkit:literal; )*) => {
        $( $(#[$m])* pub const $name: u32 = $val; )*
        $(#[$tm])*
        pub const $table: &[$crate::abi::CApiVersion] =
            &[ $( $crate::abi::CApiVersion { rust_name: stringify!($name), toolkit: $toolkit, value: $name } ),* ];
    };
}
