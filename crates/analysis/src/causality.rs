//! Request causality: the span tree of each request across processes, made robust to real data.
//!
//! [`build_causality`] turns a [`Dataset`] into one [`RequestTree`] per trace. Every span of the
//! trace appears exactly once. A span's parent is the span its propagated context names
//! ([`Span::parent_span_id`]; for Jaeger input the first `CHILD_OF` or `FOLLOWS_FROM` reference,
//! in order, whose span is in the trace — Jaeger UI's rule, see the Jaeger reader); other references and links stay on the span ([`Span::links`]). Each span is
//! marked with how it hangs in the tree ([`ParentLink`]): a root, an orphan whose parent is not in
//! the trace (it becomes an extra root), a span where a parent cycle was cut, or a child whose
//! parent ran in the same process (local) or in another one (cross-process: node A / daemon X →
//! node B / daemon Y).
//!
//! ## Real data
//! Nothing here panics, whatever the input; every repair is counted in [`CausalityWarnings`].
//! - **Duplicate span ids.** A copy of an earlier span (every field equal but the process
//!   number, [`Span::is_copy_of`]: the same file read twice, a retried batch) is dropped, by the
//!   rule every view shares ([`Dataset::copies`]). A client span and a server span
//!   sharing an id (Zipkin-style shared spans) become parent and child, as Jaeger's span-id
//!   deduplicator does. Otherwise both are kept; the first one read owns the id for its children.
//! - **Cycles.** A parent chain that loops is cut at its earliest-starting span, which becomes a
//!   root ([`trace_tree`](crate::tree::trace_tree) draws the same trees).
//! - **Missing parents** make orphans (roots, counted).
//! - **Negative durations** (end before start) are read as zero-length spans at their start;
//!   zero durations and children that start before or end after their parent are counted.
//! - **Clock skew between nodes.** For every client span with a server child on another node,
//!   unless both processes ran under one kernel (one `ringtrace.boot_id`, else one `host.id`:
//!   they read one clock, whatever their `host.name`, as the demo's nodes do), the child's clock
//!   offset lies in `[server.end − client.end, server.start − client.start]` (the server ran
//!   inside the client call); [`ClockSkew`] reports, per node pair, the median of those
//!   intervals' midpoints (the offset assuming symmetric network latency, as NTP does) and the
//!   intersection of the intervals. With [`CausalityOptions::adjust_skew`], times are shifted by
//!   Jaeger's clock-skew adjuster: walking each tree from its root, a span on another node than
//!   its parent (and not on the same machine) that does not fit inside the (already adjusted)
//!   parent is moved to the middle of it — or aligned to its start when it is longer — and its
//!   node's subtree moves with it.
//!
//! ## Layout
//! A tree's spans are stored in depth-first order: roots by start time, each span's children
//! by start time (ties in dataset order), so a subtree is a contiguous run.

use std::collections::BTreeMap;
use std::fmt;

use foldhash::{HashMap, HashMapExt};
use ringtrace_core::{SpanId, TraceId};

use crate::model::{Dataset, Span, SpanKind};

/// How [`build_causality`] treats times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CausalityOptions {
    /// Shift spans on other nodes than their parent (and under another kernel, by
    /// `ringtrace.boot_id`, else `host.id`) by Jaeger's clock-skew adjuster.
    pub adjust_skew: bool,
}

/// How a span hangs in its request tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParentLink {
    /// A root: the span names no parent.
    Root,
    /// The span names a parent that is not in the trace: an orphan, kept as an extra root.
    MissingParent,
    /// The span's parent chain looped back to it; the loop was cut here and the span is a root.
    CycleBroken,
    /// The parent ran in the same process.
    Local,
    /// The parent ran in another process: the request crossed a process boundary.
    CrossProcess,
}

impl ParentLink {
    /// Whether the span is a root of its tree (a true root, an orphan or a cut cycle).
    pub fn is_root(self) -> bool {
        matches!(self, ParentLink::Root | ParentLink::MissingParent | ParentLink::CycleBroken)
    }

    /// The lowercase name: `root`, `missing-parent`, `cycle-broken`, `local`, `cross-process`.
    pub fn as_str(self) -> &'static str {
        match self {
            ParentLink::Root => "root",
            ParentLink::MissingParent => "missing-parent",
            ParentLink::CycleBroken => "cycle-broken",
            ParentLink::Local => "local",
            ParentLink::CrossProcess => "cross-process",
        }
    }
}

impl fmt::Display for ParentLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One span in a [`RequestTree`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CausalSpan {
    /// Index into [`Dataset::spans`].
    pub span: usize,
    /// The parent, as an index into [`RequestTree::spans`]; `None` for a root.
    pub parent: Option<usize>,
    /// How the span hangs under its parent.
    pub link: ParentLink,
    /// Nesting depth; roots are 0.
    pub depth: usize,
    /// Start, Unix nanoseconds, after any clock-skew adjustment.
    pub start_unix_ns: u64,
    /// End, Unix nanoseconds, after any adjustment; never before the start.
    pub end_unix_ns: u64,
    first_child: usize,
    child_count: usize,
}

impl CausalSpan {
    /// End minus start.
    pub fn duration_ns(&self) -> u64 {
        self.end_unix_ns - self.start_unix_ns
    }
}

/// Repairs made while building trees; each field counts spans.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CausalityWarnings {
    /// Spans whose parent is not in their trace (kept as roots).
    pub orphans: u64,
    /// Spans identical to one already read, dropped.
    pub duplicate_spans_dropped: u64,
    /// Spans sharing their id with a different span of the trace (kept).
    pub duplicate_span_ids: u64,
    /// Parent cycles cut.
    pub cycles_broken: u64,
    /// Spans ending before they start (read as zero-length).
    pub negative_durations: u64,
    /// Spans with zero duration (after the repair above).
    pub zero_durations: u64,
    /// Spans starting before their parent starts or ending after it ends.
    pub children_outside_parent: u64,
    /// Spans whose times the clock-skew adjuster moved.
    pub skew_adjusted_spans: u64,
}

impl CausalityWarnings {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &CausalityWarnings) {
        self.orphans += other.orphans;
        self.duplicate_spans_dropped += other.duplicate_spans_dropped;
        self.duplicate_span_ids += other.duplicate_span_ids;
        self.cycles_broken += other.cycles_broken;
        self.negative_durations += other.negative_durations;
        self.zero_durations += other.zero_durations;
        self.children_outside_parent += other.children_outside_parent;
        self.skew_adjusted_spans += other.skew_adjusted_spans;
    }

    /// Every counter with its name, in declaration order.
    pub fn counters(&self) -> [(&'static str, u64); 8] {
        [
            ("orphans", self.orphans),
            ("duplicate_spans_dropped", self.duplicate_spans_dropped),
            ("duplicate_span_ids", self.duplicate_span_ids),
            ("cycles_broken", self.cycles_broken),
            ("negative_durations", self.negative_durations),
            ("zero_durations", self.zero_durations),
            ("children_outside_parent", self.children_outside_parent),
            ("skew_adjusted_spans", self.skew_adjusted_spans),
        ]
    }

    /// Each counter that is not zero, said in words for a note: what the spans were, and what
    /// was done with them (`["3 orphans (kept as roots: no parent in the trace)"]`).
    pub fn described(&self) -> Vec<String> {
        let said = |name: &str, n: u64| -> String {
            let s = if n == 1 { "" } else { "s" };
            match name {
                "orphans" => format!("{n} orphan{s} (kept as root{s}: no parent in the trace)"),
                "duplicate_spans_dropped" => format!("{n} span{s} read twice (dropped)"),
                "duplicate_span_ids" => format!("{n} span{s} sharing an id with another span (kept)"),
                "cycles_broken" => format!("{n} parent cycle{s} (cut)"),
                "negative_durations" => format!("{n} span{s} ending before the start (read as zero-length)"),
                "zero_durations" => format!("{n} zero-length span{s}"),
                "children_outside_parent" => format!(
                    "{n} span{s} outside the parent's time (starting before it or ending after it: a \
                     server span still sending its reply when its client's call returns is one)"
                ),
                "skew_adjusted_spans" => format!("{n} span{s} moved by the clock-skew adjustment"),
                other => format!("{} {n}", other.replace('_', " ")),
            }
        };
        self.counters().iter().filter(|(_, n)| *n > 0).map(|&(name, n)| said(name, n)).collect()
    }

    /// Whether nothing was repaired or noticed.
    pub fn is_empty(&self) -> bool {
        self.counters().iter().all(|(_, n)| *n == 0)
    }
}

/// The spans of one trace (one end-to-end request) as a forest, normally a single tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestTree {
    /// The trace.
    pub trace_id: TraceId,
    /// The spans in depth-first order (see the [module docs](self)).
    pub spans: Vec<CausalSpan>,
    /// The roots, as indices into [`RequestTree::spans`], by start time.
    pub roots: Vec<usize>,
    /// What was repaired in this trace.
    pub warnings: CausalityWarnings,
    child_ids: Vec<usize>,
}

impl RequestTree {
    /// The children of span `i` (an index into [`RequestTree::spans`]) by start time.
    pub fn children(&self, i: usize) -> &[usize] {
        match self.spans.get(i) {
            Some(s) => &self.child_ids[s.first_child..s.first_child + s.child_count],
            None => &[],
        }
    }

    /// How much of `[start, end)` the children of span `i` cover: the length of the union of
    /// their intervals clipped to it. A span's self time is its duration minus this.
    pub fn children_covered_ns(&self, i: usize, start: u64, end: u64) -> u64 {
        let mut covered: u64 = 0;
        let mut run: Option<(u64, u64)> = None;
        // Children are sorted by start, and clipping keeps that order.
        for &c in self.children(i) {
            let child = &self.spans[c];
            let (cs, ce) = (child.start_unix_ns.max(start), child.end_unix_ns.min(end));
            if cs >= ce {
                continue;
            }
            run = match run {
                Some((rs, re)) if cs <= re => Some((rs, re.max(ce))),
                Some((rs, re)) => {
                    covered += re - rs;
                    Some((cs, ce))
                }
                None => Some((cs, ce)),
            };
        }
        covered + run.map_or(0, |(rs, re)| re - rs)
    }

    /// The model span behind tree span `i`.
    pub fn span<'d>(&self, data: &'d Dataset, i: usize) -> &'d Span {
        &data.spans[self.spans[i].span]
    }

    /// The earliest start over the trace's spans (0 for an empty tree).
    pub fn start_unix_ns(&self) -> u64 {
        self.spans.iter().map(|s| s.start_unix_ns).min().unwrap_or(0)
    }

    /// The latest end over the trace's spans (0 for an empty tree).
    pub fn end_unix_ns(&self) -> u64 {
        self.spans.iter().map(|s| s.end_unix_ns).max().unwrap_or(0)
    }

    /// The request's latency: latest end minus earliest start (Jaeger's trace duration).
    pub fn duration_ns(&self) -> u64 {
        self.end_unix_ns().saturating_sub(self.start_unix_ns())
    }

    /// The first root: the span the request started with.
    pub fn root(&self) -> Option<usize> {
        self.roots.first().copied()
    }

    /// The application request id (`request.id`) of the first span that carries one.
    pub fn request_id<'d>(&self, data: &'d Dataset) -> Option<&'d str> {
        self.spans.iter().find_map(|s| data.spans[s.span].request_id.as_deref())
    }

    /// Spans whose parent ran in another process.
    pub fn cross_process_edges(&self) -> usize {
        self.spans.iter().filter(|s| s.link == ParentLink::CrossProcess).count()
    }

    /// The distinct processes ([`Span::process`]) the request touched, sorted.
    pub fn processes(&self, data: &Dataset) -> Vec<usize> {
        let mut p: Vec<usize> = self.spans.iter().map(|s| data.spans[s.span].process).collect();
        p.sort_unstable();
        p.dedup();
        p
    }
}

/// The estimated clock offset of one node against another, from client/server span pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockSkew {
    /// The node of the client spans.
    pub client_node: String,
    /// The node of the server spans.
    pub server_node: String,
    /// Client → server span pairs the estimate rests on.
    pub pairs: u64,
    /// Median of the pairs' midpoint estimates: how far the server's clock runs ahead of the
    /// client's (negative: behind), assuming symmetric network latency.
    pub offset_ns: i64,
    /// The largest lower bound over the pairs (`server.end − client.end`).
    pub lower_bound_ns: i64,
    /// The smallest upper bound over the pairs (`server.start − client.start`).
    pub upper_bound_ns: i64,
}

impl ClockSkew {
    /// Whether every pair fits some single offset (the bounds do not cross).
    pub fn consistent(&self) -> bool {
        self.lower_bound_ns <= self.upper_bound_ns
    }

    /// Whether the data shows skew: no single offset fits, or zero is outside the bounds.
    pub fn detected(&self) -> bool {
        !(self.lower_bound_ns <= 0 && 0 <= self.upper_bound_ns)
    }
}

/// Every request of a dataset as a tree, with what was repaired and the clock skew seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Causality {
    /// One tree per trace, by trace id.
    pub traces: Vec<RequestTree>,
    /// The sum of the trees' warnings.
    pub warnings: CausalityWarnings,
    /// Per (client node, server node) pair seen in client → server spans across nodes, sorted.
    pub clock_skew: Vec<ClockSkew>,
}

impl Causality {
    /// The tree of `trace`, if the dataset holds it.
    pub fn tree(&self, trace: TraceId) -> Option<&RequestTree> {
        self.traces.binary_search_by(|t| t.trace_id.cmp(&trace)).ok().map(|i| &self.traces[i])
    }

    /// The indices into [`Causality::traces`] of the slowest `percent` % of requests by latency
    /// ([`RequestTree::duration_ns`]), slowest first (ties by trace id). At least one request is
    /// taken when there is any and `percent` is positive; `percent` is clamped to 0–100 (NaN
    /// counts as 0).
    pub fn slowest(&self, percent: f64) -> Vec<usize> {
        let latencies: Vec<(TraceId, u64)> =
            self.traces.iter().map(|t| (t.trace_id, t.duration_ns())).collect();
        slowest(&latencies, percent)
    }

    /// Total spans over all trees.
    pub fn span_count(&self) -> usize {
        self.traces.iter().map(|t| t.spans.len()).sum()
    }
}

/// The indices into `latencies` ((trace, latency) of each request) of the slowest `percent` %,
/// slowest first, ties by trace id: the rule of [`Causality::slowest`], for requests met one at
/// a time.
pub fn slowest(latencies: &[(TraceId, u64)], percent: f64) -> Vec<usize> {
    let percent = if percent.is_nan() { 0.0 } else { percent.clamp(0.0, 100.0) };
    if percent == 0.0 {
        return Vec::new();
    }
    let mut order: Vec<usize> = (0..latencies.len()).collect();
    order.sort_by(|&a, &b| latencies[b].1.cmp(&latencies[a].1).then(latencies[a].0.cmp(&latencies[b].0)));
    let n = (percent / 100.0 * order.len() as f64).ceil() as usize;
    order.truncate(n.clamp(1, order.len().max(1)));
    order
}

/// The `k` slowest requests among those offered one at a time, slowest first, ties by `K` (a
/// trace id, or the order requests were met in): [`slowest`]'s order, in O(log k) an offer.
#[derive(Debug)]
pub struct Slowest<K: Ord, T> {
    k: usize,
    /// A max-heap by key: its top is the least slow request kept, the first to go.
    heap: std::collections::BinaryHeap<Kept<K, T>>,
}

/// A request kept by [`Slowest`], ordered by its key alone.
#[derive(Debug)]
struct Kept<K: Ord, T> {
    key: (std::cmp::Reverse<u64>, K),
    value: T,
}

impl<K: Ord, T> PartialEq for Kept<K, T> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl<K: Ord, T> Eq for Kept<K, T> {}

impl<K: Ord, T> PartialOrd for Kept<K, T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord, T> Ord for Kept<K, T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

impl<K: Ord, T> Slowest<K, T> {
    /// Keeps at most `k`.
    pub fn new(k: usize) -> Self {
        Slowest { k, heap: std::collections::BinaryHeap::new() }
    }

    /// Offers a request of `latency_ns` whose tie-breaking key is `key`; `value` is made only
    /// when the request is kept.
    pub fn offer(&mut self, latency_ns: u64, key: K, value: impl FnOnce() -> T) {
        let key = (std::cmp::Reverse(latency_ns), key);
        if self.heap.len() < self.k {
            self.heap.push(Kept { key, value: value() });
        } else if self.heap.peek().is_some_and(|top| key < top.key) {
            self.heap.pop();
            self.heap.push(Kept { key, value: value() });
        }
    }

    /// The requests kept, slowest first.
    pub fn into_sorted(self) -> Vec<T> {
        self.heap.into_sorted_vec().into_iter().map(|kept| kept.value).collect()
    }
}

/// Builds every request's tree; see the [module docs](self) for the rules.
pub fn build_causality(data: &Dataset, options: &CausalityOptions) -> Causality {
    let mut skew = SkewCollector::default();
    let mut causality = build_causality_into(data, options, &mut skew);
    causality.clock_skew = skew.estimates();
    causality
}

/// Builds every request's tree as [`build_causality`] does, adding the client → server pairs
/// across nodes to `skew` instead of estimating the skew from this dataset's alone: the store
/// streams a trace at a time and estimates once every trace has been seen.
/// [`Causality::clock_skew`] is left empty.
pub(crate) fn build_causality_into(
    data: &Dataset,
    options: &CausalityOptions,
    skew: &mut SkewCollector,
) -> Causality {
    let mut warnings = CausalityWarnings::default();
    let traces: Vec<RequestTree> = data
        .traces()
        .into_iter()
        .map(|(trace, members)| {
            let tree = build_tree(data, trace, &members, options, skew);
            warnings.add(&tree.warnings);
            tree
        })
        .collect();
    Causality { traces, warnings, clock_skew: Vec::new() }
}

/// Builds the tree of one trace from the dataset indices of its spans (in any order; spans of
/// other traces among them are treated as belonging to `trace`).
pub fn request_tree(
    data: &Dataset,
    trace: TraceId,
    members: &[usize],
    options: &CausalityOptions,
) -> RequestTree {
    build_tree(data, trace, members, options, &mut SkewCollector::default())
}

/// A span while the tree is being assembled.
struct Draft {
    span: usize,
    parent: Option<usize>,
    link: ParentLink,
    start: u64,
    end: u64,
}

/// The distinct spans of a trace, indexed by span id, before their parents are resolved.
struct Drafts {
    drafts: Vec<Draft>,
    /// Span id → the draft that owns it.
    by_id: HashMap<SpanId, usize>,
    /// Draft → its parent by a shared client/server id.
    forced_parent: HashMap<usize, usize>,
}

/// A tree's spans in depth-first order, with its roots and the children lists.
struct Layout {
    spans: Vec<CausalSpan>,
    roots: Vec<usize>,
    child_ids: Vec<usize>,
}

fn build_tree(
    data: &Dataset,
    trace: TraceId,
    members: &[usize],
    options: &CausalityOptions,
    skew: &mut SkewCollector,
) -> RequestTree {
    let mut warnings = CausalityWarnings::default();
    let mut members: Vec<usize> = members.iter().copied().filter(|&i| i < data.spans.len()).collect();
    members.sort_unstable();
    let Drafts { mut drafts, by_id, forced_parent } = drafts(data, &members, &mut warnings);
    resolve_parents(data, &mut drafts, &by_id, &forced_parent);
    break_cycles(&mut drafts);
    for d in &mut drafts {
        match d.link {
            ParentLink::MissingParent => warnings.orphans += 1,
            ParentLink::CycleBroken => warnings.cycles_broken += 1,
            _ => {}
        }
    }
    for local in 0..drafts.len() {
        if let Some(p) = drafts[local].parent {
            let cross = data.spans[drafts[p].span].process != data.spans[drafts[local].span].process;
            drafts[local].link = if cross { ParentLink::CrossProcess } else { ParentLink::Local };
        }
    }
    let Layout { spans, roots, child_ids } = layout(&drafts);
    let mut tree = RequestTree { trace_id: trace, spans, roots, warnings, child_ids };
    skew.collect(data, &tree);
    if options.adjust_skew {
        adjust_skew(data, &mut tree);
    }
    tree.warnings.children_outside_parent = children_outside_parent(&tree);
    tree
}

/// Drops copies, repairs negative durations and indexes the spans of `members` (sorted) by id;
/// a client span and a server span sharing an id become parent and child.
fn drafts(data: &Dataset, members: &[usize], warnings: &mut CausalityWarnings) -> Drafts {
    let mut drafts: Vec<Draft> = Vec::with_capacity(members.len());
    let mut by_id: HashMap<SpanId, usize> = HashMap::with_capacity(members.len());
    let mut forced_parent: HashMap<usize, usize> = HashMap::new();
    let copies = data.copies_among(members);
    for (&i, copy) in members.iter().zip(copies) {
        let span = &data.spans[i];
        let local = drafts.len();
        if copy {
            warnings.duplicate_spans_dropped += 1;
            continue;
        }
        if let Some(&first) = by_id.get(&span.span_id) {
            let other = &data.spans[drafts[first].span];
            warnings.duplicate_span_ids += 1;
            match (other.kind, span.kind) {
                (SpanKind::Client, SpanKind::Server) => {
                    forced_parent.insert(local, first);
                }
                (SpanKind::Server, SpanKind::Client) if !forced_parent.contains_key(&first) => {
                    forced_parent.insert(first, local);
                    by_id.insert(span.span_id, local);
                }
                _ => {}
            }
        } else {
            by_id.insert(span.span_id, local);
        }
        let (start, mut end) = (span.start_unix_ns, span.end_unix_ns);
        if end < start {
            warnings.negative_durations += 1;
            end = start;
        }
        if end == start {
            warnings.zero_durations += 1;
        }
        drafts.push(Draft { span: i, parent: None, link: ParentLink::Root, start, end });
    }
    Drafts { drafts, by_id, forced_parent }
}

/// Sets each draft's parent from its shared id or its parent id, and marks roots, orphans and
/// spans that name themselves.
fn resolve_parents(
    data: &Dataset,
    drafts: &mut [Draft],
    by_id: &HashMap<SpanId, usize>,
    forced_parent: &HashMap<usize, usize>,
) {
    for (local, draft) in drafts.iter_mut().enumerate() {
        let span = &data.spans[draft.span];
        let (parent, link) = if let Some(&p) = forced_parent.get(&local) {
            (Some(p), ParentLink::Local)
        } else {
            match span.parent_span_id {
                None => (None, ParentLink::Root),
                Some(id) => match by_id.get(&id) {
                    Some(&p) if p == local => (None, ParentLink::CycleBroken),
                    Some(&p) => (Some(p), ParentLink::Local),
                    None => (None, ParentLink::MissingParent),
                },
            }
        };
        draft.parent = parent;
        draft.link = link;
    }
}

/// Lays the drafts out depth first: roots, then each span's children, by start then dataset
/// order.
fn layout(drafts: &[Draft]) -> Layout {
    let n = drafts.len();
    let order = |a: &usize, b: &usize| {
        let (da, db) = (&drafts[*a], &drafts[*b]);
        da.start.cmp(&db.start).then(da.span.cmp(&db.span))
    };
    let mut kids: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut roots = Vec::new();
    for (local, draft) in drafts.iter().enumerate() {
        match draft.parent {
            Some(p) => kids[p].push(local),
            None => roots.push(local),
        }
    }
    roots.sort_by(order);
    kids.iter_mut().for_each(|k| k.sort_by(order));

    let mut new_index = vec![usize::MAX; n];
    let mut pre_order = Vec::with_capacity(n);
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for &root in &roots {
        stack.push((root, 0));
        while let Some((local, depth)) = stack.pop() {
            new_index[local] = pre_order.len();
            pre_order.push((local, depth));
            stack.extend(kids[local].iter().rev().map(|&k| (k, depth + 1)));
        }
    }

    let mut spans = Vec::with_capacity(n);
    let mut child_ids = Vec::with_capacity(n);
    for &(local, depth) in &pre_order {
        let d = &drafts[local];
        let first_child = child_ids.len();
        child_ids.extend(kids[local].iter().map(|&k| new_index[k]));
        spans.push(CausalSpan {
            span: d.span,
            parent: d.parent.map(|p| new_index[p]),
            link: d.link,
            depth,
            start_unix_ns: d.start,
            end_unix_ns: d.end,
            first_child,
            child_count: kids[local].len(),
        });
    }
    let roots = roots.iter().map(|&r| new_index[r]).collect();
    Layout { spans, roots, child_ids }
}

/// Spans that start before their parent or end after it.
fn children_outside_parent(tree: &RequestTree) -> u64 {
    tree.spans
        .iter()
        .filter(|s| {
            s.parent.is_some_and(|p| {
                let parent = &tree.spans[p];
                s.start_unix_ns < parent.start_unix_ns || s.end_unix_ns > parent.end_unix_ns
            })
        })
        .count() as u64
}

/// Cuts every parent cycle at its earliest-starting span (ties: first in dataset order).
fn break_cycles(drafts: &mut [Draft]) {
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; drafts.len()];
    let mut path: Vec<usize> = Vec::new();
    for start in 0..drafts.len() {
        let mut at = start;
        path.clear();
        loop {
            match state[at] {
                DONE => break,
                ON_PATH => {
                    let from = path.iter().position(|&p| p == at).unwrap_or(0);
                    let cut = path[from..]
                        .iter()
                        .copied()
                        .min_by_key(|&i| (drafts[i].start, drafts[i].span))
                        .unwrap_or(at);
                    drafts[cut].parent = None;
                    drafts[cut].link = ParentLink::CycleBroken;
                    break;
                }
                _ => {
                    state[at] = ON_PATH;
                    path.push(at);
                    match drafts[at].parent {
                        Some(p) => at = p,
                        None => break,
                    }
                }
            }
        }
        for &p in &path {
            state[p] = DONE;
        }
    }
}

/// Jaeger's clock-skew adjuster over one tree (spans are in depth-first order, so every parent
/// is adjusted before its children).
fn adjust_skew(data: &Dataset, tree: &mut RequestTree) {
    let mut delta = vec![0i64; tree.spans.len()];
    let mut moved = 0;
    for i in 0..tree.spans.len() {
        let Some(p) = tree.spans[i].parent else { continue };
        let (span, parent) = (&data.spans[tree.spans[i].span], &data.spans[tree.spans[p].span]);
        delta[i] = if (span.node != parent.node || span.node.is_empty()) && !one_clock(data, span, parent) {
            skew_delta(&tree.spans[i], &tree.spans[p])
        } else {
            delta[p]
        };
        if delta[i] != 0 {
            let s = &mut tree.spans[i];
            s.start_unix_ns = shift(s.start_unix_ns, delta[i]);
            s.end_unix_ns = shift(s.end_unix_ns, delta[i]).max(s.start_unix_ns);
            moved += 1;
        }
    }
    tree.warnings.skew_adjusted_spans = moved;
}

/// The shift Jaeger's adjuster gives `child` (raw times) under `parent` (adjusted times).
fn skew_delta(child: &CausalSpan, parent: &CausalSpan) -> i64 {
    let (pd, cd) = (parent.duration_ns(), child.duration_ns());
    let diff =
        |a: u64, b: u64| (i128::from(a) - i128::from(b)).clamp(i64::MIN.into(), i64::MAX.into()) as i64;
    if cd > pd {
        return diff(parent.start_unix_ns, child.start_unix_ns);
    }
    if child.start_unix_ns >= parent.start_unix_ns && child.end_unix_ns <= parent.end_unix_ns {
        return 0;
    }
    let latency = (pd - cd) / 2;
    diff(parent.start_unix_ns.saturating_add(latency), child.start_unix_ns)
}

/// Whether the processes of `a` and `b` ran under one kernel, so that their times come from one
/// clock and a difference between them is no clock skew: their `ringtrace.boot_id` resource
/// attributes agree (a kernel's random id for its boot, which containers of one host share and
/// machines cloned from one image do not), or, where either lacks one, their `host.id` do (the
/// machine id). Neither may be empty. Jaeger's adjuster likewise leaves spans of one host alone
/// (it keys hosts by their `ip` tag).
fn one_clock(data: &Dataset, a: &Span, b: &Span) -> bool {
    let ids = |s: &Span| data.processes.get(s.process).map_or((None, None), |p| p.clock_ids());
    let ((boot_a, host_a), (boot_b, host_b)) = (ids(a), ids(b));
    let agree =
        |x: Option<&str>, y: Option<&str>| matches!((x, y), (Some(x), Some(y)) if x == y && !x.is_empty());
    match (boot_a, boot_b) {
        (Some(x), Some(y)) => agree(Some(x), Some(y)),
        _ => agree(host_a, host_b),
    }
}

fn shift(t: u64, delta: i64) -> u64 {
    (i128::from(t) + i128::from(delta)).clamp(0, u64::MAX.into()) as u64
}

/// Client → server pairs across nodes, per node pair.
#[derive(Default)]
pub(crate) struct SkewCollector {
    pairs: BTreeMap<(String, String), SkewSamples>,
}

#[derive(Default)]
struct SkewSamples {
    midpoints: Vec<i64>,
    lower: i64,
    upper: i64,
}

impl SkewCollector {
    fn collect(&mut self, data: &Dataset, tree: &RequestTree) {
        for s in &tree.spans {
            let Some(p) = s.parent else { continue };
            let (server, client) = (&data.spans[s.span], &data.spans[tree.spans[p].span]);
            let parent = &tree.spans[p];
            if server.kind != SpanKind::Server
                || client.kind != SpanKind::Client
                || server.node == client.node
                || one_clock(data, server, client)
            {
                continue;
            }
            let d = |a: u64, b: u64| i128::from(a) - i128::from(b);
            let lower = d(s.end_unix_ns, parent.end_unix_ns);
            let upper = d(s.start_unix_ns, parent.start_unix_ns);
            let clamp = |x: i128| x.clamp(i64::MIN.into(), i64::MAX.into()) as i64;
            let key = (client.node.clone(), server.node.clone());
            let entry = self.pairs.entry(key).or_insert_with(|| SkewSamples {
                midpoints: Vec::new(),
                lower: i64::MIN,
                upper: i64::MAX,
            });
            entry.midpoints.push(clamp((lower + upper).div_euclid(2)));
            entry.lower = entry.lower.max(clamp(lower));
            entry.upper = entry.upper.min(clamp(upper));
        }
    }

    /// The skew of every node pair seen so far, by (client node, server node).
    pub(crate) fn estimates(&mut self) -> Vec<ClockSkew> {
        self.pairs
            .iter_mut()
            .map(|((client_node, server_node), samples)| {
                let midpoints = &mut samples.midpoints;
                midpoints.sort_unstable();
                let n = midpoints.len();
                let offset_ns = if n % 2 == 1 {
                    midpoints[n / 2]
                } else {
                    let (a, b) = (midpoints[n / 2 - 1], midpoints[n / 2]);
                    ((i128::from(a) + i128::from(b)).div_euclid(2)) as i64
                };
                ClockSkew {
                    client_node: client_node.clone(),
                    server_node: server_node.clone(),
                    pairs: n as u64,
                    offset_ns,
                    lower_bound_ns: samples.lower,
                    upper_bound_ns: samples.upper,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringtrace_core::SpanId;

    #[test]
    fn slowest_keeps_the_k_slowest_in_the_order_of_slowest() {
        let latencies: Vec<(TraceId, u64)> = [(5, 30), (1, 10), (4, 30), (2, 50), (3, 10), (6, 20)]
            .map(|(t, l)| (TraceId::new(t).unwrap(), l))
            .into();
        for k in 0..=7 {
            let mut kept = Slowest::new(k);
            for &(trace, latency) in &latencies {
                kept.offer(latency, trace, || trace);
            }
            let expected: Vec<TraceId> =
                slowest(&latencies, 100.0).into_iter().take(k).map(|i| latencies[i].0).collect();
            assert_eq!(kept.into_sorted(), expected, "k = {k}");
        }
    }

    fn span(id: u64, parent: Option<u64>, process: usize, start: u64, end: u64) -> Span {
        let (trace, span) = (TraceId::new(1).unwrap(), SpanId::new(id).unwrap());
        Span {
            node: format!("node-{process}"),
            daemon: format!("d{process}"),
            process,
            ..Span::new(trace, span, parent.map(|p| SpanId::new(p).unwrap()), format!("op{id}"), start, end)
        }
    }

    fn of_kind(span: Span, kind: SpanKind) -> Span {
        Span { kind, ..span }
    }

    fn data(spans: Vec<Span>) -> Dataset {
        Dataset { processes: vec![], spans }
    }

    fn only_tree(data: &Dataset, options: CausalityOptions) -> RequestTree {
        let c = build_causality(data, &options);
        assert_eq!(c.traces.len(), 1);
        c.traces.into_iter().next().unwrap()
    }

    #[test]
    fn depth_first_layout_with_links() {
        let d = data(vec![
            span(3, Some(1), 1, 30, 40),
            span(1, None, 0, 0, 100),
            span(2, Some(1), 0, 10, 20),
            span(4, Some(3), 1, 31, 35),
        ]);
        let t = only_tree(&d, CausalityOptions::default());
        let order: Vec<usize> = t.spans.iter().map(|s| s.span).collect();
        assert_eq!(order, [1, 2, 0, 3]);
        let links: Vec<ParentLink> = t.spans.iter().map(|s| s.link).collect();
        use ParentLink::*;
        assert_eq!(links, [Root, Local, CrossProcess, Local]);
        assert_eq!(t.children(0), [1, 2]);
        assert_eq!(t.children(2), [3]);
        assert_eq!(t.spans[3].depth, 2);
        assert_eq!(t.roots, [0]);
        assert_eq!(t.duration_ns(), 100);
        assert_eq!(t.cross_process_edges(), 1);
        assert!(t.warnings.is_empty());
    }

    #[test]
    fn orphans_cycles_duplicates_and_bad_times_are_repaired_and_counted() {
        let client = of_kind(span(7, Some(1), 0, 10, 50), SpanKind::Client);
        let server = of_kind(span(7, Some(1), 1, 12, 48), SpanKind::Server);
        let d = data(vec![
            span(1, None, 0, 0, 100),
            span(1, None, 0, 0, 100), // read twice
            span(2, Some(99), 0, 5, 6),
            span(3, Some(4), 0, 20, 30),
            span(4, Some(3), 0, 21, 22),
            span(5, Some(5), 0, 40, 30), // self parent, negative duration
            client,
            server,
            span(8, Some(1), 0, 90, 120), // ends after its parent
        ]);
        let t = only_tree(&d, CausalityOptions::default());
        let w = t.warnings;
        assert_eq!(w.duplicate_spans_dropped, 1);
        assert_eq!(w.duplicate_span_ids, 1);
        assert_eq!(w.orphans, 1);
        assert_eq!(w.cycles_broken, 2);
        assert_eq!(w.negative_durations, 1);
        assert_eq!(w.zero_durations, 1);
        assert_eq!(w.children_outside_parent, 1);
        assert_eq!(t.spans.len(), 8);
        // The server span hangs under the client span sharing its id.
        let server = t.spans.iter().position(|s| s.span == 7).unwrap();
        let client = t.spans.iter().position(|s| s.span == 6).unwrap();
        assert_eq!(t.spans[server].parent, Some(client));
        assert_eq!(t.spans[server].link, ParentLink::CrossProcess);
        // The cycle 3 <-> 4 is cut at 3, the earlier start.
        let three = t.spans.iter().position(|s| s.span == 3).unwrap();
        assert_eq!(t.spans[three].link, ParentLink::CycleBroken);
        let five = t.spans.iter().find(|s| s.span == 5).unwrap();
        assert_eq!((five.start_unix_ns, five.end_unix_ns), (40, 40));
        assert_eq!(t.roots.len(), 4);
    }

    #[test]
    fn long_cycle_and_deep_chain_do_not_recurse() {
        let n = 50_000u64;
        let mut spans: Vec<Span> =
            (1..=n).map(|i| span(i, Some(if i == 1 { n } else { i - 1 }), 0, i, i + 1)).collect();
        spans.push(span(n + 1, None, 0, 0, 10));
        let t = only_tree(&data(spans), CausalityOptions::default());
        assert_eq!(t.spans.len(), n as usize + 1);
        assert_eq!(t.warnings.cycles_broken, 1);
        assert_eq!(t.spans.iter().map(|s| s.depth).max(), Some(n as usize - 1));
    }

    #[test]
    fn skew_is_estimated_and_adjusted_like_jaeger() {
        let client = of_kind(span(2, Some(1), 0, 100, 200), SpanKind::Client);
        // The server's clock runs 1000 ns ahead: it appears at 1120..1180 instead of 120..180.
        let server = of_kind(span(3, Some(2), 1, 1120, 1180), SpanKind::Server);
        let local = span(4, Some(3), 1, 1130, 1170);
        let d = data(vec![span(1, None, 0, 0, 300), client, server, local]);

        let c = build_causality(&d, &CausalityOptions::default());
        assert_eq!(c.clock_skew.len(), 1);
        let skew = &c.clock_skew[0];
        assert_eq!((skew.client_node.as_str(), skew.server_node.as_str()), ("node-0", "node-1"));
        assert_eq!(skew.pairs, 1);
        assert_eq!(skew.offset_ns, 1000);
        assert_eq!((skew.lower_bound_ns, skew.upper_bound_ns), (980, 1020));
        assert!(skew.detected() && skew.consistent());
        assert_eq!(c.warnings.children_outside_parent, 1);

        let t = only_tree(&d, CausalityOptions { adjust_skew: true });
        let times: Vec<(u64, u64)> = t.spans.iter().map(|s| (s.start_unix_ns, s.end_unix_ns)).collect();
        assert_eq!(times, [(0, 300), (100, 200), (120, 180), (130, 170)]);
        assert_eq!(t.warnings.skew_adjusted_spans, 2);
        assert_eq!(t.warnings.children_outside_parent, 0);
    }

    #[test]
    fn warnings_are_described_in_words_and_only_when_counted() {
        assert!(CausalityWarnings::default().described().is_empty());
        let w = CausalityWarnings { orphans: 2, children_outside_parent: 3, ..Default::default() };
        let said = w.described();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].starts_with("2 orphans (kept as roots"), "{said:?}");
        assert!(said[1].starts_with("3 spans outside the parent's time (starting before it"), "{said:?}");
        let all = CausalityWarnings {
            orphans: 1,
            duplicate_spans_dropped: 1,
            duplicate_span_ids: 1,
            cycles_broken: 1,
            negative_durations: 1,
            zero_durations: 1,
            children_outside_parent: 1,
            skew_adjusted_spans: 1,
        };
        let said = all.described();
        assert_eq!(said.len(), 8);
        assert!(said.iter().all(|s| s.starts_with("1 ") && !s.contains('_')), "each in words: {said:?}");
        assert!(said[0].starts_with("1 orphan (kept as root:"), "one, not ones: {said:?}");
    }

    /// Two nodes under one kernel (the same boot id, else the same `host.id`, as the demo's are)
    /// read one clock: a server span outside its client's call is no skew, and nothing is moved.
    /// Nodes on machines of their own, or without either id, are estimated and adjusted as before.
    #[test]
    fn nodes_on_one_machine_show_no_skew() {
        let client = of_kind(span(2, Some(1), 0, 100, 200), SpanKind::Client);
        let server = of_kind(span(3, Some(2), 1, 1120, 1180), SpanKind::Server);
        let spans = vec![span(1, None, 0, 0, 300), client, server];
        use crate::model::{Process, Value};
        let process = |node: &str, host: Option<&str>| Process {
            node: node.into(),
            attributes: host.map(|h| ("host.id".to_owned(), Value::Str(h.into()))).into_iter().collect(),
            ..Process::default()
        };
        let booted = |node: &str, host: &str, boot: &str| {
            let mut p = process(node, Some(host));
            p.attributes.push(("ringtrace.boot_id".to_owned(), Value::Str(boot.into())));
            p
        };
        for (hosts, skewed) in [
            ([Some("m1"), Some("m1")], false),
            ([Some("m1"), Some("m2")], true),
            ([Some("m1"), None], true),
            ([None, None], true),
        ] {
            let d = Dataset {
                processes: vec![process("node-0", hosts[0]), process("node-1", hosts[1])],
                spans: spans.clone(),
            };
            let c = build_causality(&d, &CausalityOptions::default());
            assert_eq!(c.clock_skew.len(), usize::from(skewed), "{hosts:?}");
            let t = only_tree(&d, CausalityOptions { adjust_skew: true });
            assert_eq!(t.warnings.skew_adjusted_spans, u64::from(skewed), "{hosts:?}");
            assert_eq!(t.warnings.children_outside_parent, u64::from(!skewed), "{hosts:?}");
        }

        // One machine id in two boots (machines cloned from one image): two clocks. One boot, or
        // one machine id with a boot id on one side only: one.
        for (boots, skewed) in [(["b1", "b2"], true), (["b1", "b1"], false)] {
            let d = Dataset {
                processes: vec![booted("node-0", "m1", boots[0]), booted("node-1", "m1", boots[1])],
                spans: spans.clone(),
            };
            assert_eq!(
                build_causality(&d, &CausalityOptions::default()).clock_skew.len(),
                usize::from(skewed)
            );
        }
        let d = Dataset {
            processes: vec![booted("node-0", "m1", "b1"), process("node-1", Some("m1"))],
            spans: spans.clone(),
        };
        assert!(build_causality(&d, &CausalityOptions::default()).clock_skew.is_empty());
        // Containers of one host: machine ids of their own, one kernel.
        let d = Dataset {
            processes: vec![booted("node-0", "c1", "b1"), booted("node-1", "c2", "b1")],
            spans: spans.clone(),
        };
        assert!(build_causality(&d, &CausalityOptions::default()).clock_skew.is_empty());

        // A span on another node of its parent's machine moves with its parent, by the shift
        // the parent got, rather than being fitted into it anew.
        let d = Dataset {
            processes: vec![
                process("node-0", Some("m1")),
                process("node-1", Some("m2")),
                process("node-2", Some("m2")),
            ],
            spans: vec![
                span(1, None, 0, 0, 300),
                span(2, Some(1), 1, 1120, 1180),
                span(3, Some(2), 2, 1125, 1135),
            ],
        };
        let t = only_tree(&d, CausalityOptions { adjust_skew: true });
        let times: Vec<(u64, u64)> = t.spans.iter().map(|s| (s.start_unix_ns, s.end_unix_ns)).collect();
        assert_eq!(times, [(0, 300), (120, 180), (125, 135)], "fitted anew it would be at 145..155");
    }

    #[test]
    fn empty_and_out_of_range_members() {
        let d = data(vec![]);
        let c = build_causality(&d, &CausalityOptions::default());
        assert!(c.traces.is_empty());
        let t = request_tree(&d, TraceId::new(1).unwrap(), &[3, 4], &CausalityOptions::default());
        assert!(t.spans.is_empty());
        assert_eq!(t.duration_ns(), 0);
        assert_eq!(t.root(), None);
        assert!(t.children(0).is_empty());
    }
}
