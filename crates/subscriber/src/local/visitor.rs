//! Turns `tracing` field values into [`Record::Field`]s without allocating.

use std::fmt::Write as _;

use ringtrace_core::propagation::REQUEST_ID_KEY;
use ringtrace_core::record::{push_str_field, FieldValue, Record};
use tracing_core::field::{Field, Visit};

use super::LocalRing;

/// Stages one record per field in `ring`'s current group; remembers a `request.id` value.
pub(crate) struct FieldVisitor<'a> {
    pub ring: &'a mut LocalRing,
    /// The `request.id` field's value, when the span has one (this allocates, once per request).
    pub request_id: Option<String>,
}

impl FieldVisitor<'_> {
    /// Pushes a number or boolean; `shown` is its text, kept only for a `request.id` field.
    #[inline]
    fn push(&mut self, field: &Field, value: FieldValue, shown: &dyn std::fmt::Display) {
        self.ring.stage(Record::Field { name: field.name(), value });
        if field.name() == REQUEST_ID_KEY {
            self.request_id = Some(shown.to_string());
        }
    }

    fn push_str(&mut self, field: &Field, s: &str) {
        push_str_field(field.name(), s, |r| self.ring.stage(r));
        if field.name() == REQUEST_ID_KEY {
            self.request_id = Some(s.to_owned());
        }
    }
}

impl Visit for FieldVisitor<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, FieldValue::I64(value), &value);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, FieldValue::U64(value), &value);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, FieldValue::F64(value), &value);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, FieldValue::Bool(value), &value);
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.push(field, FieldValue::I64(v), &v),
            Err(_) => self.record_debug(field, &value),
        }
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        match u64::try_from(value) {
            Ok(v) => self.push(field, FieldValue::U64(v), &v),
            Err(_) => self.record_debug(field, &value),
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push_str(field, value);
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut scratch = std::mem::take(&mut self.ring.scratch);
        scratch.clear();
        let _ = write!(scratch, "{value:?}");
        self.push_str(field, &scratch);
        self.ring.scratch = scratch;
    }
}
