//! Dependency graphs: which daemons (and which nodes) call which, how often, and how often the
//! call failed.
//!
//! The rule is that of Jaeger's in-memory store: every span whose parent is in the same trace is
//! one call from the parent's service to the span's service — self-calls included, so a
//! daemon's internal nesting shows as a loop. A call is an error when the called span's status is
//! an error. The node-level graph applies the same rule to the spans' nodes. Orphans and roots
//! are not calls.

use std::collections::BTreeMap;

use crate::causality::Causality;
use crate::model::Dataset;

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
}

/// The service-level and node-level dependency graphs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DependencyGraph {
    /// Daemon → daemon links, by parent then child.
    pub services: Vec<DependencyLink>,
    /// Node → node links, by parent then child.
    pub nodes: Vec<DependencyLink>,
}

/// The dependency graphs of every request in `causality`.
pub fn dependency_graph(data: &Dataset, causality: &Causality) -> DependencyGraph {
    let mut services: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    let mut nodes: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    for tree in &causality.traces {
        for s in &tree.spans {
            let Some(p) = s.parent else { continue };
            let (child, parent) = (&data.spans[s.span], tree.span(data, p));
            let error = u64::from(child.status.is_error());
            let e = services.entry((&parent.daemon, &child.daemon)).or_default();
            e.0 += 1;
            e.1 += error;
            let e = nodes.entry((&parent.node, &child.node)).or_default();
            e.0 += 1;
            e.1 += error;
        }
    }
    let links = |m: BTreeMap<(&str, &str), (u64, u64)>| {
        m.into_iter()
            .map(|((parent, child), (call_count, error_count))| DependencyLink {
                parent: parent.to_owned(),
                child: child.to_owned(),
                call_count,
                error_count,
            })
            .collect()
    };
    DependencyGraph { services: links(services), nodes: links(nodes) }
}
