//! `wire_enum!`: an enum stored in records as one byte, declared as one table of
//! `Variant = byte => "name"` rows. From the table come the enum (`#[repr(u8)]`, the usual derives,
//! `Serialize` with the `serde` feature), `from_u8` (a byte this version does not know reads as the
//! `#[default]` variant, so values from newer writers stay readable), `name` and `ALL`.

macro_rules! wire_enum {
    (
        $(#[$attr:meta])*
        pub enum $name:ident {
            $( $(#[$vattr:meta])* $variant:ident = $byte:literal => $text:literal, )+
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize))]
        #[repr(u8)]
        pub enum $name {
            $( $(#[$vattr])* $variant = $byte, )+
        }

        impl $name {
            /// Every variant, in byte order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The variant stored as `v`; a byte this version does not know is the default variant.
            pub fn from_u8(v: u8) -> $name {
                match v {
                    $( $byte => $name::$variant, )+
                    _ => $name::default(),
                }
            }

            /// The name used in summaries, exports and dumps.
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }
    };
}

pub(crate) use wire_enum;
