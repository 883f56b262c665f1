//! Critical path: the chain of work that determined a request's latency, by Jaeger UI's algorithm.
//!
//! This reproduces Jaeger UI's critical-path view (`jaeger-ui`,
//! `packages/jaeger-ui/src/components/TracePage/CriticalPath/`) section for section, as the
//! reference cases in `tests/oracles/jaeger-critical-path/` pin it down — except for orphan
//! spans, which get a path here and none there (see below):
//!
//! 1. **Tree.** A span's parent is the one the readers give it (for Jaeger input, the first
//!    `CHILD_OF` or `FOLLOWS_FROM` reference whose span is in the trace, as Jaeger UI takes it;
//!    see [`causality`](crate::causality)).
//! 2. **Blocking spans only.** A `CONSUMER` child of a `PRODUCER` parent does not block its
//!    parent: it is dropped with its whole subtree. Nor does a network wait — an I/O call's span
//!    (`docs/io-records.md`) that receives, connects or accepts on a socket — whose parent has
//!    a child in another process: the caller's `recv` lasts as long as the remote work it waits
//!    for, and ends last, so it would hide that work from the path. (Jaeger traces have no I/O
//!    spans: this never applies to them.)
//! 3. **Clipping.** Walking down from each root, every child is clipped to its parent's
//!    *already clipped* bounds; a child entirely outside them (starting at or after the parent's
//!    end, or ending at or before its start) is dropped with its subtree.
//! 4. **Walk.** From the root: take the *last-finishing child* — the child with the latest
//!    (clipped) end; on returning to a parent, the latest-ending child that ends strictly
//!    before the start of the child just left. If there is one, the parent's gap from that
//!    child's end up to the limit (the parent's end, or the returning child's start) is on the
//!    path, and the walk descends into the child. If there is none, the span's own remaining
//!    section, from its start up to the limit, is on the path, and the walk returns to the
//!    parent with the limit set to this span's start.
//!
//! Sections are emitted in the order the walk finds them — from the end of the trace back to its
//! start — are half-open `[start, end)`, never zero-length, and are not merged: a parent appears
//! once per gap. With several roots (orphans included) each root's path follows the previous
//! one's, roots by start time. Ties between children ending at the same time go to the one that
//! started first.
//!
//! **One deliberate difference from Jaeger UI: orphans.** Jaeger UI's clipping drops a span
//! whose parent is not in the trace, with its subtree, so an orphan's work gets no path there.
//! Here an orphan is a root of its own ([`ParentLink::MissingParent`](crate::ParentLink)) and
//! gets a path like any root: a trace with a lost parent span still shows where its time went.
//! The reference cases have no orphans, so they agree either way.
//!
//! Times are those of the [`RequestTree`] (clock-skew adjusted if it was built so).
//! Jaeger UI treats a limit of `0` as "no limit" (JavaScript falsiness); this implementation does
//! not, which only matters for spans at the Unix epoch.
//!
//! The walk is iterative and keeps, per span, its children sorted by end time with a cursor:
//! limits only decrease, so each child is passed over once and a trace of `n` spans takes
//! `O(n log n)`.

use crate::causality::{Causality, RequestTree};
use crate::model::{Dataset, SpanKind};

/// One section of a critical path: a span's time that the request waited on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathSection {
    /// Index into [`Dataset::spans`].
    pub span: usize,
    /// Index into [`RequestTree::spans`].
    pub tree_index: usize,
    /// Section start, Unix nanoseconds (inclusive).
    pub start_unix_ns: u64,
    /// Section end, Unix nanoseconds (exclusive).
    pub end_unix_ns: u64,
}

impl PathSection {
    /// End minus start; always positive.
    pub fn duration_ns(&self) -> u64 {
        self.end_unix_ns - self.start_unix_ns
    }
}

/// The critical path of one request: sections latest first, as Jaeger finds them.
pub fn critical_path(data: &Dataset, tree: &RequestTree) -> Vec<PathSection> {
    let bounds = clipped_bounds(data, tree);
    let mut walker = Walk {
        tree,
        by_end: children_by_end(tree, &bounds),
        cursor: vec![0; tree.spans.len()],
        bounds,
        sections: Vec::new(),
    };
    for &root in &tree.roots {
        if walker.bounds[root].is_some() {
            walker.walk_from(root);
        }
    }
    walker.sections
}

/// A span's interval, Unix nanoseconds.
#[derive(Clone, Copy)]
struct Bounds {
    start: u64,
    end: u64,
}

/// Each span's bounds clipped to its parent's clipped bounds, in [`RequestTree::spans`] order;
/// `None` when dropped (non-blocking, or outside its parent).
fn clipped_bounds(data: &Dataset, tree: &RequestTree) -> Vec<Option<Bounds>> {
    let mut bounds: Vec<Option<Bounds>> = vec![None; tree.spans.len()];
    // Spans with a child in another process.
    let mut remote_child = vec![false; tree.spans.len()];
    for s in &tree.spans {
        if let Some(p) = s.parent {
            let (child, parent) = (&data.spans[s.span], &data.spans[tree.spans[p].span]);
            remote_child[p] |= (&child.node, &child.daemon) != (&parent.node, &parent.daemon);
        }
    }
    for i in 0..tree.spans.len() {
        let s = &tree.spans[i];
        let own = Bounds { start: s.start_unix_ns, end: s.end_unix_ns };
        bounds[i] = match s.parent {
            None => Some(own),
            Some(p) => {
                let (parent, child) = (&data.spans[tree.spans[p].span], &data.spans[s.span]);
                let consumed = parent.kind == SpanKind::Producer && child.kind == SpanKind::Consumer;
                let waiting = remote_child[p] && crate::io::is_network_wait(child);
                let blocking = !consumed && !waiting;
                match bounds.get(p).copied().flatten() {
                    Some(parent) if blocking => clip(own, parent),
                    _ => None,
                }
            }
        };
    }
    bounds
}

/// Each kept span's kept children, by end descending then tree order (start order).
fn children_by_end(tree: &RequestTree, bounds: &[Option<Bounds>]) -> Vec<Vec<usize>> {
    let mut by_end: Vec<Vec<usize>> = vec![Vec::new(); tree.spans.len()];
    for (i, kids) in by_end.iter_mut().enumerate() {
        if bounds[i].is_none() {
            continue;
        }
        kids.extend(tree.children(i).iter().copied().filter(|&c| bounds[c].is_some()));
        if kids.len() > 1 {
            kids.sort_by_key(|&c| std::cmp::Reverse(bounds[c].map_or(0, |b| b.end)));
        }
    }
    by_end
}

/// The walk over one request's tree, and the sections found so far.
struct Walk<'t> {
    tree: &'t RequestTree,
    bounds: Vec<Option<Bounds>>,
    by_end: Vec<Vec<usize>>,
    /// Per span, the first child in `by_end` not yet passed over.
    cursor: Vec<usize>,
    sections: Vec<PathSection>,
}

impl Walk<'_> {
    /// Walks from `root` down to the last-finishing children and back up, adding the sections.
    fn walk_from(&mut self, root: usize) {
        let mut current = root;
        let mut limit: Option<u64> = None;
        while let Some(Bounds { start, end }) = self.bounds[current] {
            let section_end = limit.unwrap_or(end);
            if let Some(child) = self.next_child(current, limit) {
                let child_end = self.bounds[child].map_or(section_end, |b| b.end);
                self.push(current, child_end, section_end);
                current = child;
                limit = None;
            } else {
                self.push(current, start, section_end);
                if current == root {
                    break;
                }
                match self.tree.spans[current].parent {
                    Some(p) => {
                        limit = Some(start);
                        current = p;
                    }
                    None => break,
                }
            }
        }
    }

    /// The child of `current` to descend into: the last to finish, or with a `limit`, the last
    /// to finish strictly before it.
    fn next_child(&mut self, current: usize, limit: Option<u64>) -> Option<usize> {
        let kids = &self.by_end[current];
        let Some(limit) = limit else {
            return kids.first().copied();
        };
        let c = &mut self.cursor[current];
        while *c < kids.len() && self.bounds[kids[*c]].is_none_or(|b| b.end >= limit) {
            *c += 1;
        }
        kids.get(*c).copied()
    }

    /// Adds the section `[from, to)` of span `current`, unless it is empty.
    fn push(&mut self, current: usize, from: u64, to: u64) {
        if from < to {
            self.sections.push(PathSection {
                span: self.tree.spans[current].span,
                tree_index: current,
                start_unix_ns: from,
                end_unix_ns: to,
            });
        }
    }
}

/// `child` clipped to `parent`, or `None` when it lies entirely outside (Jaeger UI's
/// `sanitizeOverFlowingChildren`).
fn clip(child: Bounds, parent: Bounds) -> Option<Bounds> {
    let (Bounds { start: cs, end: ce }, Bounds { start: ps, end: pe }) = (child, parent);
    if cs >= ps {
        if cs >= pe {
            None
        } else {
            Some(Bounds { start: cs, end: ce.min(pe) })
        }
    } else if ce <= ps {
        None
    } else {
        Some(Bounds { start: ps, end: ce.min(pe) })
    }
}

/// Critical-path time per span: the sum of each span's sections, in [`RequestTree::spans`]
/// order.
pub fn time_on_path(tree: &RequestTree, sections: &[PathSection]) -> Vec<u64> {
    let mut on_path = vec![0u64; tree.spans.len()];
    for s in sections {
        if let Some(t) = on_path.get_mut(s.tree_index) {
            *t += s.duration_ns();
        }
    }
    on_path
}

/// The critical path of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceCriticalPath {
    /// Index into [`Causality::traces`].
    pub tree: usize,
    /// Sections, latest first (see [`critical_path()`]).
    pub sections: Vec<PathSection>,
}

/// The critical path of every request in `causality`, in trace-id order.
pub fn critical_paths(data: &Dataset, causality: &Causality) -> Vec<TraceCriticalPath> {
    causality
        .traces
        .iter()
        .enumerate()
        .map(|(tree, t)| TraceCriticalPath { tree, sections: critical_path(data, t) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causality::{build_causality, CausalityOptions};
    use crate::model::Span;
    use ringtrace_core::{SpanId, TraceId};

    fn span(id: u64, parent: Option<u64>, start: u64, end: u64, kind: SpanKind) -> Span {
        let (trace, span) = (TraceId::new(1).unwrap(), SpanId::new(id).unwrap());
        Span {
            kind,
            ..Span::new(trace, span, parent.map(|p| SpanId::new(p).unwrap()), format!("op{id}"), start, end)
        }
    }

    /// (span id, start, end) latest first.
    fn path(spans: Vec<Span>) -> Vec<(u64, u64, u64)> {
        let data = Dataset { processes: vec![], spans };
        let c = build_causality(&data, &CausalityOptions::default());
        let tree = &c.traces[0];
        critical_path(&data, tree)
            .iter()
            .map(|s| (data.spans[s.span].span_id.get(), s.start_unix_ns, s.end_unix_ns))
            .collect()
    }

    use SpanKind::*;

    #[test]
    fn sequential_children_and_parent_gaps() {
        let p = path(vec![
            span(1, None, 1, 101, Internal),
            span(2, Some(1), 20, 40, Internal),
            span(3, Some(1), 50, 60, Internal),
        ]);
        assert_eq!(p, [(1, 60, 101), (3, 50, 60), (1, 40, 50), (2, 20, 40), (1, 1, 20)]);
    }

    #[test]
    fn child_ending_exactly_at_the_limit_is_not_taken() {
        // Jaeger takes a sibling only if it ends strictly before the returning child's start.
        let p = path(vec![
            span(1, None, 0, 100, Internal),
            span(2, Some(1), 10, 50, Internal),
            span(3, Some(1), 50, 90, Internal),
        ]);
        assert_eq!(p, [(1, 90, 100), (3, 50, 90), (1, 0, 50)]);
    }

    #[test]
    fn producer_consumer_is_not_blocking_but_client_server_is() {
        let p = path(vec![span(1, None, 0, 100, Producer), span(2, Some(1), 10, 50, Consumer)]);
        assert_eq!(p, [(1, 0, 100)]);
        let p = path(vec![span(1, None, 0, 100, Client), span(2, Some(1), 10, 50, Server)]);
        assert_eq!(p, [(1, 50, 100), (2, 10, 50), (1, 0, 10)]);
    }

    /// The caller's `recv` waits as long as the server works and ends last: it does not hide
    /// the server's work. Without a remote sibling it is on the path like any span.
    #[test]
    fn a_network_wait_does_not_hide_the_remote_work_it_waits_for() {
        let io = |mut s: Span, op: &str| {
            s.attributes.push((crate::io::attr::OP.into(), crate::model::Value::Str(op.into())));
            s
        };
        let remote = |mut s: Span| {
            s.daemon = "server".into();
            s
        };
        let spans = vec![
            span(1, None, 0, 100, Client),
            io(span(2, Some(1), 5, 10, Internal), "send"),
            io(span(3, Some(1), 10, 95, Internal), "recv"),
            remote(span(4, Some(1), 20, 80, Server)),
        ];
        assert_eq!(path(spans.clone()), [(1, 80, 100), (4, 20, 80), (1, 10, 20), (2, 5, 10), (1, 0, 5)]);
        let local_only: Vec<Span> = spans.into_iter().take(3).collect();
        assert_eq!(path(local_only), [(1, 95, 100), (3, 10, 95), (1, 0, 10)]);
    }

    #[test]
    fn equal_ends_go_to_the_earlier_start_and_zero_length_children_split_the_parent() {
        let p = path(vec![
            span(1, None, 0, 100, Internal),
            span(2, Some(1), 30, 80, Internal),
            span(3, Some(1), 20, 80, Internal),
            span(4, Some(1), 10, 10, Internal),
        ]);
        // The zero-length child has no section of its own but splits its parent's, as in Jaeger.
        assert_eq!(p, [(1, 80, 100), (3, 20, 80), (1, 10, 20), (1, 0, 10)]);
    }

    #[test]
    fn orphan_roots_each_get_a_path() {
        let p = path(vec![span(1, None, 0, 10, Internal), span(2, Some(9), 20, 30, Internal)]);
        assert_eq!(p, [(1, 0, 10), (2, 20, 30)]);
    }

    #[test]
    fn wide_and_deep_traces_are_fast_and_do_not_recurse() {
        // 100k children of one root, each ending before the next starts: every child and
        // every gap is on the path.
        let n = 100_000u64;
        let mut spans = vec![span(1, None, 0, 10 * n + 10, Internal)];
        spans.extend((0..n).map(|i| span(i + 2, Some(1), 10 * i + 1, 10 * i + 6, Internal)));
        assert_eq!(path(spans).len(), 2 * n as usize + 1);
        // A 100k-deep chain.
        let spans: Vec<Span> =
            (0..n).map(|i| span(i + 1, (i > 0).then_some(i), i, 2 * n - i, Internal)).collect();
        assert_eq!(path(spans).len(), 2 * n as usize - 1);
    }
}
