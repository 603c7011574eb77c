//! tprof decoder library.
