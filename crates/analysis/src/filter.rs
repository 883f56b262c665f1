//! Zoom filters shared by profiles and flame graphs: a time range, a node, a daemon, a request
//! and an operation.

use crate::model::Span;

/// Which spans a view keeps. Every field that is set must match; an empty filter keeps
/// everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpanFilter {
    /// Keep spans that end after this time (Unix nanoseconds); views that measure time clip
    /// spans to the range.
    pub from_unix_ns: Option<u64>,
    /// Keep spans that start before this time (Unix nanoseconds, exclusive).
    pub to_unix_ns: Option<u64>,
    /// Keep spans of this node ([`Span::node`]).
    pub node: Option<String>,
    /// Keep spans of this daemon ([`Span::daemon`]).
    pub daemon: Option<String>,
    /// Keep spans of this request: its `request.id`, or its trace id in 32 hex digits.
    pub request: Option<String>,
    /// Keep spans of this operation: the span name, or the method as profiles show it
    /// ([`Span::qualified_method`]: `target::name`, or `daemon: name` without a target).
    pub operation: Option<String>,
}

impl SpanFilter {
    /// Whether nothing is filtered.
    pub fn is_empty(&self) -> bool {
        *self == SpanFilter::default()
    }

    /// Whether `span` passes every condition.
    pub fn matches(&self, span: &Span) -> bool {
        self.matches_place(span)
            && self.matches_request(span)
            && self.matches_operation(span)
            && self.overlaps(span.start_unix_ns, span.end_unix_ns)
    }

    /// The node and daemon conditions only.
    pub fn matches_place(&self, span: &Span) -> bool {
        self.node.as_deref().is_none_or(|n| span.node == n)
            && self.daemon.as_deref().is_none_or(|d| span.daemon == d)
    }

    /// The request condition only.
    pub fn matches_request(&self, span: &Span) -> bool {
        self.request.as_deref().is_none_or(|r| {
            span.request_id.as_deref() == Some(r) || span.trace_id.to_string().eq_ignore_ascii_case(r)
        })
    }

    /// The operation condition only.
    pub fn matches_operation(&self, span: &Span) -> bool {
        self.operation.as_deref().is_none_or(|op| {
            span.name == op
                || match span.target.as_deref() {
                    Some(t) if !t.is_empty() => {
                        op.len() == t.len() + 2 + span.name.len()
                            && op.starts_with(t)
                            && op[t.len()..].starts_with("::")
                            && op.ends_with(span.name.as_str())
                    }
                    _ => {
                        op.len() == span.daemon.len() + 2 + span.name.len()
                            && op.starts_with(span.daemon.as_str())
                            && op[span.daemon.len()..].starts_with(": ")
                            && op.ends_with(span.name.as_str())
                    }
                }
        })
    }

    /// Whether `[start, end]` meets the time range (a zero-length span at its start counts).
    pub fn overlaps(&self, start_unix_ns: u64, end_unix_ns: u64) -> bool {
        let end = end_unix_ns.max(start_unix_ns);
        self.from_unix_ns.is_none_or(|from| end >= from && (end > from || start_unix_ns >= from))
            && self.to_unix_ns.is_none_or(|to| start_unix_ns < to)
    }

    /// `[start, end)` clipped to the time range; `None` when nothing is left.
    pub fn clip(&self, start_unix_ns: u64, end_unix_ns: u64) -> Option<(u64, u64)> {
        let s = start_unix_ns.max(self.from_unix_ns.unwrap_or(0));
        let e = end_unix_ns.min(self.to_unix_ns.unwrap_or(u64::MAX));
        (s < e).then_some((s, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringtrace_core::{SpanId, TraceId};

    fn span() -> Span {
        Span {
            target: Some("demo::worker".into()),
            node: "node-2".into(),
            daemon: "worker".into(),
            request_id: Some("req-1".into()),
            ..Span::new(TraceId::new(0xabc).unwrap(), SpanId::new(1).unwrap(), None, "disk_read", 100, 200)
        }
    }

    #[test]
    fn each_condition() {
        let s = span();
        assert!(SpanFilter::default().matches(&s));
        let f = |f: SpanFilter| f.matches(&s);
        assert!(f(SpanFilter { node: Some("node-2".into()), ..Default::default() }));
        assert!(!f(SpanFilter { node: Some("node-1".into()), ..Default::default() }));
        assert!(!f(SpanFilter { daemon: Some("master".into()), ..Default::default() }));
        assert!(f(SpanFilter { request: Some("req-1".into()), ..Default::default() }));
        assert!(f(SpanFilter { request: Some(format!("{:032x}", 0xabc)), ..Default::default() }));
        assert!(!f(SpanFilter { request: Some("req-2".into()), ..Default::default() }));
        assert!(f(SpanFilter { operation: Some("disk_read".into()), ..Default::default() }));
        assert!(f(SpanFilter { operation: Some("demo::worker::disk_read".into()), ..Default::default() }));
        assert!(!f(SpanFilter { operation: Some("demo::worker:disk_read".into()), ..Default::default() }));
        assert!(!f(SpanFilter { operation: Some("demo::workerXXdisk_read".into()), ..Default::default() }));
        assert!(f(SpanFilter { from_unix_ns: Some(150), to_unix_ns: Some(160), ..Default::default() }));
        assert!(!f(SpanFilter { from_unix_ns: Some(201), ..Default::default() }));
        assert!(!f(SpanFilter { to_unix_ns: Some(100), ..Default::default() }));
    }

    #[test]
    fn clipping() {
        let f = SpanFilter { from_unix_ns: Some(150), to_unix_ns: Some(180), ..Default::default() };
        assert_eq!(f.clip(100, 200), Some((150, 180)));
        assert_eq!(f.clip(100, 150), None);
        assert_eq!(SpanFilter::default().clip(5, 5), None);
    }
}
