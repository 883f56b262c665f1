//! Ring records.
