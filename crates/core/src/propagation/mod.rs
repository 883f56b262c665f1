//! W3C trace-context propagation (being written).
