//! Dependency graphs: which daemons (and which nodes) call which, how often, and how often the
//! call failed.
//!
//! The rule is that of Jaeger's in-memory store: every span whose parent is in the same trace is
//! one call from the parent's service to the span's service — self-calls included, so a
//! daemon's internal nesting shows as a loop. A call is an error when the called span's status is
//! an error. The node-level graph applies the same rule to the spans' nodes. Orphans and roots
//! are not calls.
//!
//! Peers nobody instrumented (a database, a cache) are nodes of their own, as in Grafana Tempo's
//! service graph: a span that names the service it calls (`peer.service`, else `db.system`, else
//! `server.address`) and has no child span in another daemon is one call to that peer; so is a
//! `connect` an I/O call records (`ringtrace::io`) to an address no recorded socket has as its
//! own, named `address:port`. Their links are marked `uninstrumented`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use foldhash::{HashMap, HashSet, HashSetExt};

use crate::causality::{Causality, RequestTree};
use crate::model::{Dataset, Span, Value};

/// Calls from one daemon (or node) to another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DependencyLink {
    /// The caller: the parent span's daemon (or node).
    pub parent: String,
    /// The callee: the child span's daemon (or node).
    pub child: String,
    /// Parent → child span pairs.
    pub call_count: u64,
    /// Those whose child span ended in error.
    pub error_count: u64,
    /// The child is a peer nobody recorded, known from the callers' side only.
    pub uninstrumented: bool,
}

/// The service-level and node-level dependency graphs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DependencyGraph {
    /// Daemon → daemon links, by parent then child.
    pub services: Vec<DependencyLink>,
    /// Node → node links, by parent then child.
    pub nodes: Vec<DependencyLink>,
}

/// An attribute's value as text: borrowed when it is text already.
fn text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::Str(s) => Cow::Borrowed(s),
        other => Cow::Owned(other.to_string()),
    }
}

/// The name of the uninstrumented peer a span calls, from its attributes.
fn named_peer(span: &Span) -> Option<Cow<'_, str>> {
    ["peer.service", "db.system", "server.address"]
        .iter()
        .find_map(|k| span.attribute(k).map(text).filter(|v| !v.is_empty()))
}

/// The dependency graphs of every request in `causality`.
pub fn dependency_graph(data: &Dataset, causality: &Causality) -> DependencyGraph {
    let mut graph = DependencyBuilder::default();
    graph.add(data, &causality.traces);
    graph.finish()
}

/// Calls between daemons or nodes: (caller, callee, uninstrumented) → (calls, errors).
type Links = BTreeMap<(String, String, bool), (u64, u64)>;

/// [`Links`] of one trace, by borrowed names: a trace makes many calls along few links, which
/// are then added to the graph's once each ([`add_links`]).
type TraceLinks<'d> = HashMap<(&'d str, Cow<'d, str>, bool), (u64, u64)>;

/// The calls of one trace between daemons and between nodes.
#[derive(Default)]
struct TraceCalls<'d> {
    services: TraceLinks<'d>,
    nodes: TraceLinks<'d>,
}

impl<'d> TraceCalls<'d> {
    /// One call from `caller` to the daemon and node `callee`.
    fn count(
        &mut self,
        caller: &'d Span,
        callee: (Cow<'d, str>, Cow<'d, str>),
        uninstrumented: bool,
        error: bool,
    ) {
        for (links, from, to) in
            [(&mut self.services, &caller.daemon, callee.0), (&mut self.nodes, &caller.node, callee.1)]
        {
            let e = links.entry((from.as_str(), to, uninstrumented)).or_default();
            e.0 += 1;
            e.1 += u64::from(error);
        }
    }
}

/// Adds `trace`'s calls to `links`.
fn add_links(links: &mut Links, trace: TraceLinks<'_>) {
    for ((from, to, uninstrumented), (calls, errors)) in trace {
        let e = links.entry((from.to_owned(), to.into_owned(), uninstrumented)).or_default();
        e.0 += calls;
        e.1 += errors;
    }
}

/// Builds a [`DependencyGraph`] from traces added one at a time, from datasets of their own:
/// how the views over the Parquet store ([`crate::engine`]) add each trace as they stream it.
///
/// Whether a `connect` reached an uninstrumented peer depends on every trace (a recorded
/// process listening at that address makes it a recorded call): such calls wait until
/// [`finish`](Self::finish), which knows every recorded socket.
#[derive(Debug, Default)]
pub struct DependencyBuilder {
    /// The endpoints of the sockets the I/O calls recorded as their own: where a recorded
    /// process accepted, or served, connections.
    recorded_ends: HashSet<String>,
    /// `connect` calls, by (daemon, node, peer, peer address, error), not yet known to be calls
    /// to an uninstrumented peer.
    connects: BTreeMap<(String, String, String, String, bool), u64>,
    services: Links,
    nodes: Links,
}

impl DependencyBuilder {
    /// Adds the calls of `trees`, requests of `data` (every request of a trace in one call).
    pub fn add(&mut self, data: &Dataset, trees: &[RequestTree]) {
        let mut calls = TraceCalls::default();
        // Spans with a child in another daemon: what they call is recorded.
        let mut calls_recorded = HashSet::new();
        for tree in trees {
            for s in &tree.spans {
                let Some(p) = s.parent else { continue };
                let (child, parent) = (&data.spans[s.span], tree.span(data, p));
                let callee = (Cow::Borrowed(child.daemon.as_str()), Cow::Borrowed(child.node.as_str()));
                calls.count(parent, callee, false, child.status.is_error());
                if parent.daemon != child.daemon {
                    calls_recorded.insert(tree.spans[p].span);
                }
            }
        }
        for tree in trees {
            for s in &tree.spans {
                let span = &data.spans[s.span];
                if calls_recorded.contains(&s.span) {
                    continue;
                }
                let Some(peer) = named_peer(span) else { continue };
                let host = span.attribute("server.address").map_or_else(|| peer.clone(), text);
                calls.count(span, (peer, host), true, span.status.is_error());
            }
        }
        add_links(&mut self.services, calls.services);
        add_links(&mut self.nodes, calls.nodes);
        let calls = crate::io::io_calls(data);
        if calls.is_empty() {
            return;
        }
        // Parents whose calls reach another daemon's spans: what they connect to is recorded.
        let parents_recorded: HashSet<_> =
            calls_recorded.iter().map(|&i| (data.spans[i].trace_id, data.spans[i].span_id)).collect();
        self.recorded_ends
            .extend(calls.iter().filter_map(|c| c.record.local.as_ref().map(ToString::to_string)));
        for c in calls.iter().filter(|c| c.in_span && c.record.op == Some(crate::io::IoOp::Connect)) {
            let Some(remote) = &c.record.remote else { continue };
            let span = &data.spans[c.span];
            let parent_reaches =
                span.parent_span_id.is_some_and(|p| parents_recorded.contains(&(span.trace_id, p)));
            if parent_reaches {
                continue;
            }
            let key = (
                span.daemon.clone(),
                span.node.clone(),
                remote.to_string(),
                remote.address.clone(),
                !c.record.ok(),
            );
            *self.connects.entry(key).or_default() += 1;
        }
    }

    /// The graphs of every trace added.
    pub fn finish(mut self) -> DependencyGraph {
        for ((daemon, node, peer, address, error), n) in std::mem::take(&mut self.connects) {
            if self.recorded_ends.contains(&peer) {
                continue;
            }
            for (links, from, to) in [(&mut self.services, daemon, peer), (&mut self.nodes, node, address)] {
                let e = links.entry((from, to, true)).or_default();
                e.0 += n;
                e.1 += if error { n } else { 0 };
            }
        }
        let links = |m: Links| {
            m.into_iter()
                .map(|((parent, child, uninstrumented), (call_count, error_count))| DependencyLink {
                    parent,
                    child,
                    call_count,
                    error_count,
                    uninstrumented,
                })
                .collect()
        };
        DependencyGraph { services: links(self.services), nodes: links(self.nodes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causality::{build_causality, CausalityOptions};
    use crate::io::attr;
    use crate::model::{Span, Value};
    use ringtrace_core::{SpanId, TraceId};

    fn span(id: u64, parent: Option<u64>, daemon: &str, attrs: &[(&str, Value)]) -> Span {
        Span {
            daemon: daemon.into(),
            node: format!("{daemon}-host"),
            attributes: attrs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect(),
            ..Span::new(
                TraceId::new(1).unwrap(),
                SpanId::new(id).unwrap(),
                parent.map(|p| SpanId::new(p).unwrap()),
                "op",
                0,
                10,
            )
        }
    }

    /// Peers nobody traced are nodes of their own: named by `db.system` or `peer.service` on the
    /// calling span, or by the address an I/O `connect` reached; a peer that is traced is not.
    #[test]
    fn uninstrumented_peers_are_nodes_of_their_own() {
        let s = |v: &str| Value::Str(v.into());
        let spans = vec![
            span(1, None, "api", &[]),
            span(2, Some(1), "api", &[("db.system", s("postgresql")), ("server.address", s("db-1"))]),
            span(3, Some(1), "api", &[("peer.service", s("billing"))]),
            // Names its peer, but the peer is traced (its span is a child in another daemon).
            span(4, Some(1), "api", &[("peer.service", s("users"))]),
            span(5, Some(4), "users", &[]),
            span(
                6,
                Some(1),
                "api",
                &[
                    (attr::OP, s("connect")),
                    (attr::PEER_ADDRESS, s("10.0.0.9")),
                    (attr::PEER_PORT, Value::Int(6379)),
                    (attr::TRANSPORT, s("tcp")),
                    (attr::FD, Value::Int(7)),
                ],
            ),
        ];
        let data = Dataset { processes: vec![], spans };
        let graph = dependency_graph(&data, &build_causality(&data, &CausalityOptions::default()));
        let untraced: Vec<(&str, &str)> = graph
            .services
            .iter()
            .filter(|l| l.uninstrumented)
            .map(|l| (l.parent.as_str(), l.child.as_str()))
            .collect();
        assert_eq!(untraced, [("api", "10.0.0.9:6379"), ("api", "billing"), ("api", "postgresql")]);
        assert!(graph.services.iter().any(|l| !l.uninstrumented && l.child == "users"));
        let nodes: Vec<&str> =
            graph.nodes.iter().filter(|l| l.uninstrumented).map(|l| l.child.as_str()).collect();
        assert_eq!(nodes, ["10.0.0.9", "billing", "db-1"]);
    }
}
