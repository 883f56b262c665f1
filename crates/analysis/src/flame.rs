//! Flame graphs of span time: where time goes, by stack, with total and self time.
//!
//! A span's **stack** is its ancestry: within its process ([`StackMode::Process`], the view
//! from inside one daemon) or along the whole request tree across processes
//! ([`StackMode::Request`], the view from the client down to the disk). Each frame is labelled
//! by [`FrameLabel`]. A span's **self time** is its duration minus the union of its children's
//! intervals, each clipped to the span: children running in parallel are not subtracted twice,
//! and a child that outlives its parent (spawned work) is subtracted only up to the parent's
//! end. A network wait also leaves out the remote work it waits for
//! ([`self_times_in`](crate::stats::self_times_in)). Spans closed by an early return or by a panic unwinding through them carry the time
//! they really closed, so their self time is right too. A frame's **total** is its self time
//! plus its children's totals; with parallel children it can exceed the wall-clock time, as a
//! CPU flame graph's width exceeds the elapsed time of a multi-threaded program.
//!
//! [`FlameScope`] restricts the graph to some requests (by id, or the slowest N %, or all but
//! them), a node, a daemon, an operation's subtrees and a time range (span times are clipped to
//! it), so the flame graph of the slowest requests can be set beside the rest.
//! [`FlameGraph::prune`] drops frames under a share of the total, as flame-graph tools do to
//! stay readable: their time stays in their parent's self time, so every width is kept.
//!
//! Writers are in [`flame_output`](crate::flame_output): folded stacks (the input of
//! `flamegraph.pl` and `inferno`), d3-flame-graph JSON and SVG.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use crate::causality::{Causality, ParentLink, RequestTree};
use crate::filter::SpanFilter;
use crate::model::{Dataset, Span};

/// Default pruning threshold, percent of the total: frames under it are folded into their
/// parent.
pub const DEFAULT_MIN_PERCENT: f64 = 1.0;

/// Where a span's stack begins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StackMode {
    /// At the first ancestor in the span's own process: one daemon's view.
    Process,
    /// At the request's root, across processes.
    #[default]
    Request,
}

impl StackMode {
    /// `process` or `request`.
    pub fn as_str(self) -> &'static str {
        match self {
            StackMode::Process => "process",
            StackMode::Request => "request",
        }
    }
}

/// A stack mode that is not `process` or `request`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown stack mode {value:?}: expected process or request")]
pub struct ParseStackModeError {
    /// The name given.
    pub value: String,
}

impl FromStr for StackMode {
    type Err = ParseStackModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [StackMode::Process, StackMode::Request]
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseStackModeError { value: s.to_owned() })
    }
}

impl fmt::Display for StackMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a frame is called.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FrameLabel {
    /// The method, `target::name`: the same method on every node and daemon is one frame.
    Method,
    /// `daemon/target::name`.
    #[default]
    DaemonMethod,
    /// `node/daemon/target::name`: every node apart.
    NodeDaemonMethod,
}

impl FrameLabel {
    /// `method`, `daemon` or `node`.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameLabel::Method => "method",
            FrameLabel::DaemonMethod => "daemon",
            FrameLabel::NodeDaemonMethod => "node",
        }
    }

    /// The frame name of `span`. `;` (the folded-stack separator) becomes `:`, line breaks
    /// become spaces.
    pub fn label(self, span: &Span) -> String {
        let method = span.method();
        let raw = match self {
            FrameLabel::Method => method,
            FrameLabel::DaemonMethod => format!("{}/{method}", span.daemon),
            FrameLabel::NodeDaemonMethod => format!("{}/{}/{method}", span.node, span.daemon),
        };
        raw.replace(';', ":").replace(['\n', '\r'], " ")
    }
}

/// A frame label that is not `method`, `daemon` or `node`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown frame label {value:?}: expected method, daemon or node")]
pub struct ParseFrameLabelError {
    /// The name given.
    pub value: String,
}

impl FromStr for FrameLabel {
    type Err = ParseFrameLabelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [FrameLabel::Method, FrameLabel::DaemonMethod, FrameLabel::NodeDaemonMethod]
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseFrameLabelError { value: s.to_owned() })
    }
}

/// Which requests a flame graph covers.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum RequestSelection {
    /// Every request.
    #[default]
    All,
    /// The slowest `percent` % of requests ([`Causality::slowest`]).
    Slowest(f64),
    /// Every request except the slowest `percent` %.
    AllButSlowest(f64),
}

/// What a flame graph covers and how its stacks are built.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlameScope {
    /// Where stacks begin.
    pub stacks: StackMode,
    /// How frames are named.
    pub label: FrameLabel,
    /// Which requests count.
    pub requests: RequestSelection,
    /// Node, daemon, request, time range and operation. Node and daemon select the spans whose
    /// time counts (their ancestors still name the stack); the operation selects those spans
    /// and everything below them; the time range clips every span.
    pub filter: SpanFilter,
}

/// One frame: a stack prefix and the time spent in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The frame's label (`"all"` for the root).
    pub name: String,
    /// The parent frame's index in [`FlameGraph::frames`]; `None` for the root.
    pub parent: Option<usize>,
    /// Child frames' indices, by name.
    pub children: Vec<usize>,
    /// Time spent in spans with exactly this stack, not in their children, nanoseconds.
    pub self_ns: u64,
    /// `self_ns` plus the children's totals, nanoseconds.
    pub total_ns: u64,
    /// Spans with exactly this stack.
    pub spans: u64,
}

/// Span time by stack, as a tree of frames under a root named `all`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlameGraph {
    /// Frames; index 0 is the root, and every parent comes before its children.
    pub frames: Vec<Frame>,
    /// Requests that contributed.
    pub requests: usize,
}

impl FlameGraph {
    /// The root's total: all time in the graph, nanoseconds.
    pub fn total_ns(&self) -> u64 {
        self.frames.first().map_or(0, |f| f.total_ns)
    }

    /// Spans counted.
    pub fn span_count(&self) -> u64 {
        self.frames.iter().map(|f| f.spans).sum()
    }

    /// The labels from the root's child down to `frame`.
    pub fn stack(&self, frame: usize) -> Vec<&str> {
        let mut out = Vec::new();
        let mut at = Some(frame);
        while let Some(i) = at {
            if i == 0 {
                break;
            }
            out.push(self.frames[i].name.as_str());
            at = self.frames[i].parent;
        }
        out.reverse();
        out
    }

    /// The folded stacks: `(frames joined by ';', self time ns)` for every frame with self time,
    /// sorted by stack — the lines `flamegraph.pl` and `inferno` read. Each line is built once,
    /// in time proportional to its length.
    pub fn folded(&self) -> Vec<(String, u64)> {
        let mut lines: Vec<(String, u64)> = Vec::new();
        let mut stack = String::new();
        // Depth-first with the current stack as one string: entering a frame appends its label,
        // leaving truncates back to the length it had before.
        let mut walk: Vec<(usize, usize)> =
            self.frames.first().map_or(Vec::new(), |f| f.children.iter().rev().map(|&c| (c, 0)).collect());
        while let Some((i, len)) = walk.pop() {
            let Some(frame) = self.frames.get(i) else { continue };
            stack.truncate(len);
            if len > 0 {
                stack.push(';');
            }
            stack.push_str(&frame.name);
            if frame.self_ns > 0 {
                lines.push((stack.clone(), frame.self_ns));
            }
            let here = stack.len();
            walk.extend(frame.children.iter().rev().map(|&c| (c, here)));
        }
        lines.sort();
        lines
    }

    /// The graph without frames whose total is under `min_percent` % of the root's: each
    /// pruned subtree's time is added to its parent's self time, so every kept frame keeps its
    /// total. A threshold of 0 (or NaN) keeps every frame.
    pub fn prune(&self, min_percent: f64) -> FlameGraph {
        let limit = if min_percent.is_nan() || min_percent <= 0.0 {
            0.0
        } else {
            self.total_ns() as f64 * min_percent.min(100.0) / 100.0
        };
        let mut frames: Vec<Frame> = Vec::new();
        let mut new_index: Vec<Option<usize>> = vec![None; self.frames.len()];
        for (i, frame) in self.frames.iter().enumerate() {
            let keep = i == 0 || limit == 0.0 || frame.total_ns as f64 >= limit;
            let parent = frame.parent.and_then(|p| new_index[p]);
            if keep && (i == 0 || parent.is_some()) {
                new_index[i] = Some(frames.len());
                frames.push(Frame { children: Vec::new(), parent, ..frame.clone() });
                if let Some(p) = parent {
                    let child = frames.len() - 1;
                    frames[p].children.push(child);
                }
            } else if let Some(p) = parent {
                // The first pruned frame of a subtree: its whole total folds into the parent.
                frames[p].self_ns = frames[p].self_ns.saturating_add(frame.total_ns);
                frames[p].spans += subtree_spans(self, i);
            }
        }
        FlameGraph { frames, requests: self.requests }
    }
}

/// Spans in frame `i` and every frame below it (walked with a stack: graphs can be deep).
fn subtree_spans(graph: &FlameGraph, i: usize) -> u64 {
    let mut spans = 0;
    let mut stack = vec![i];
    while let Some(f) = stack.pop() {
        if let Some(frame) = graph.frames.get(f) {
            spans += frame.spans;
            stack.extend(&frame.children);
        }
    }
    spans
}

/// The flame graph of `causality`'s requests within `scope`; see the [module docs](self).
pub fn flame_graph(data: &Dataset, causality: &Causality, scope: &FlameScope) -> FlameGraph {
    let selected: Vec<&RequestTree> = match scope.requests {
        RequestSelection::All => causality.traces.iter().collect(),
        RequestSelection::Slowest(p) => {
            causality.slowest(p).into_iter().map(|i| &causality.traces[i]).collect()
        }
        RequestSelection::AllButSlowest(p) => {
            let mut slow = vec![false; causality.traces.len()];
            causality.slowest(p).into_iter().for_each(|i| slow[i] = true);
            causality.traces.iter().zip(slow).filter(|(_, s)| !s).map(|(t, _)| t).collect()
        }
    };

    let mut graph = FlameBuilder::new(scope.clone());
    for tree in selected {
        graph.add(data, tree);
    }
    graph.finish()
}

/// Builds a [`FlameGraph`] from request trees added one at a time, from datasets of their own:
/// how the views over the Parquet store ([`crate::engine`]) add each trace as they stream it.
/// Which requests to add is the caller's choice; the scope's stacks, labels and filter apply to
/// each. The graph does not depend on the order the trees come in.
pub struct FlameBuilder {
    scope: FlameScope,
    builder: Builder,
    requests: usize,
    frame_of: Vec<u32>,
    focus: Vec<bool>,
}

impl FlameBuilder {
    /// No requests yet, within `scope` (its request selection is not looked at).
    pub fn new(scope: FlameScope) -> Self {
        FlameBuilder { scope, builder: Builder::new(), requests: 0, frame_of: Vec::new(), focus: Vec::new() }
    }

    /// Adds the request `tree` of `data`.
    pub fn add(&mut self, data: &Dataset, tree: &RequestTree) {
        let (scope, builder) = (&self.scope, &mut self.builder);
        if scope.filter.request.is_some()
            && !tree.spans.iter().any(|s| scope.filter.matches_request(&data.spans[s.span]))
        {
            return;
        }
        let (frame_of, focus) = (&mut self.frame_of, &mut self.focus);
        frame_of.clear();
        focus.clear();
        let mut remote = crate::stats::RemoteCover::default();
        let mut contributed = false;
        for (i, cs) in tree.spans.iter().enumerate() {
            let span = &data.spans[cs.span];
            let parent_frame = match (cs.parent, scope.stacks) {
                (Some(p), StackMode::Request) => frame_of[p],
                (Some(p), StackMode::Process) if cs.link == ParentLink::Local => frame_of[p],
                _ => 0,
            };
            let frame = builder.child(parent_frame, scope.label.label(span));
            frame_of.push(frame);
            let in_focus = scope.filter.matches_operation(span) || cs.parent.is_some_and(|p| focus[p]);
            focus.push(in_focus);
            if !in_focus || !scope.filter.matches_place(span) {
                continue;
            }
            let Some((start, end)) = scope.filter.clip(cs.start_unix_ns, cs.end_unix_ns) else {
                // A zero-length span inside the range still counts as a span.
                if scope.filter.overlaps(cs.start_unix_ns, cs.end_unix_ns) {
                    builder.frames[frame as usize].spans += 1;
                    contributed = true;
                }
                continue;
            };
            // A network wait's remote work is the remote frames' (see `stats::self_times_in`).
            let covered = tree.children_covered_ns(i, start, end) + remote.covered(data, tree, i, start, end);
            let f = &mut builder.frames[frame as usize];
            f.self_ns = f.self_ns.saturating_add((end - start).saturating_sub(covered));
            f.spans += 1;
            contributed = true;
        }
        self.requests += usize::from(contributed);
    }

    /// The graph of every request added.
    pub fn finish(self) -> FlameGraph {
        self.builder.finish(self.requests)
    }
}

/// Frames being collected: a trie keyed by (parent, label), rooted at frame 0, `"all"`.
struct Builder {
    frames: Vec<Frame>,
    index: HashMap<(u32, String), u32>,
}

impl Frame {
    fn empty(name: String, parent: Option<usize>) -> Self {
        Frame { name, parent, children: vec![], self_ns: 0, total_ns: 0, spans: 0 }
    }
}

/// `frames` renumbered in depth-first order, children by name: the same graph gets the same
/// numbering whatever order its stacks were met in.
fn depth_first(mut frames: Vec<Frame>) -> Vec<Frame> {
    if frames.is_empty() {
        return frames;
    }
    let mut order = Vec::with_capacity(frames.len());
    let mut walk = vec![0usize];
    while let Some(i) = walk.pop() {
        order.push(i);
        walk.extend(frames[i].children.iter().rev());
    }
    let mut new_index = vec![0usize; frames.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let mut slots: Vec<Option<Frame>> = frames.drain(..).map(Some).collect();
    order
        .iter()
        .filter_map(|&old| slots[old].take())
        .map(|f| Frame {
            parent: f.parent.map(|p| new_index[p]),
            children: f.children.iter().map(|&c| new_index[c]).collect(),
            ..f
        })
        .collect()
}

/// What a frame carries with everything above it: its total time and its spans.
struct Weight {
    total_ns: u64,
    spans: u64,
}

impl Builder {
    fn new() -> Self {
        Builder { frames: vec![Frame::empty("all".into(), None)], index: HashMap::new() }
    }

    fn child(&mut self, parent: u32, name: String) -> u32 {
        if let Some(&i) = self.index.get(&(parent, name.clone())) {
            return i;
        }
        let i = self.frames.len() as u32;
        self.frames.push(Frame::empty(name.clone(), Some(parent as usize)));
        self.index.insert((parent, name), i);
        i
    }

    /// Totals, children lists, and the frames that carry nothing removed.
    fn finish(self, requests: usize) -> FlameGraph {
        let n = self.frames.len();
        let mut weight: Vec<Weight> =
            self.frames.iter().map(|f| Weight { total_ns: f.self_ns, spans: f.spans }).collect();
        for i in (1..n).rev() {
            let p = self.frames[i].parent.unwrap_or(0);
            weight[p].total_ns = weight[p].total_ns.saturating_add(weight[i].total_ns);
            weight[p].spans += weight[i].spans;
        }
        // Keep frames with time or spans below them; renumber parents before children.
        let mut new_index: Vec<Option<usize>> = vec![None; n];
        let mut frames: Vec<Frame> = Vec::new();
        for (i, frame) in self.frames.into_iter().enumerate() {
            if i != 0 && weight[i].total_ns == 0 && weight[i].spans == 0 {
                continue;
            }
            let parent = frame.parent.and_then(|p| new_index[p]);
            if i != 0 && parent.is_none() {
                continue;
            }
            new_index[i] = Some(frames.len());
            frames.push(Frame { total_ns: weight[i].total_ns, parent, ..frame });
        }
        for i in 1..frames.len() {
            if let Some(p) = frames[i].parent {
                frames[p].children.push(i);
            }
        }
        let names: Vec<String> = frames.iter().map(|f| f.name.clone()).collect();
        for f in &mut frames {
            f.children.sort_by(|&a, &b| names[a].cmp(&names[b]));
        }
        FlameGraph { frames: depth_first(frames), requests }
    }
}
