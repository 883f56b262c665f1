//! Anomalies across peer nodes: which node runs a daemon unlike the other nodes running it.
//!
//! The frequency-profile paper's observation is that the nodes of a cluster that run the same
//! daemon do the same work, so their method mixes look alike; a node at fault shows a different
//! mix (it retries, it times out, it stops serving) or the same methods taking longer. For each
//! daemon type that runs on two nodes or more, [`anomalies`] compares every node with its peers
//! in time windows and gives each (node, daemon) a score, with the methods that explain it.
//!
//! ## The score
//! In each window, for each node of the daemon that ran spans in it (and has at least one peer
//! that did too):
//! - **Mix** — the Jensen–Shannon divergence, in bits (0 to 1), between the node's method mix
//!   (each method's share of the node's spans) and the *typical peer's* mix: per method, the
//!   median share over the daemon's active nodes, renormalised. The node itself is among them,
//!   so with three nodes or more one deviant node cannot drag the reference towards itself.
//! - **Latency** — per method that the node ran five times or more and at least one peer twice
//!   or more: the doublings between the node's median duration and the typical peer's (the
//!   median of the medians of the nodes that ran it twice or more — with two such nodes, their
//!   midpoint, so both look equally far from it), `|log2(node / typical)|`, times `|δ|`,
//!   Cliff's delta of the node's durations against the pooled durations of its peers (1 when
//!   every span of the node is slower than every span of the peers, near 0 when the two
//!   overlap), times the method's share of the node's spans. The product is large only when the difference is big, consistent and
//!   in a method the node spends its spans on. The terms add up over methods.
//!
//! The window's score is mix plus latency; a node's score is the mean of its window scores
//! weighted by its spans in each window. A node that slows down by ×2 in every method scores
//! about 1 from latency alone; identical nodes score near 0, with sampling noise that shrinks
//! as the windows hold more spans. Windows where a node has no active peer do not count.
//!
//! ## Reasons
//! Every term of the score belongs to a method — its share of the divergence, or its latency
//! term — so the methods that contribute most are the reasons, with the node's and the typical
//! peer's figures over the whole time range.

use std::collections::{BTreeMap, HashMap};

use crate::divergence::{cliffs_delta, js_terms, median_f64, median_sorted};
use crate::model::Dataset;
use crate::time_format::duration;

/// Fewest spans of a method a node needs in a window for its latency to be scored: the median
/// of fewer says little.
pub const MIN_LATENCY_SPANS: usize = 5;

/// Fewest spans of a method a node needs in a window for its median to count towards the
/// typical peer's.
pub const MIN_REFERENCE_SPANS: usize = 2;

/// A reason is listed when it carries at least this fraction of its node's score.
pub const REASON_MIN_FRACTION: f64 = 0.1;

/// How [`anomalies`] compares nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnomalyOptions {
    /// Window width, nanoseconds; `None` compares the whole time range as one window.
    pub window_ns: Option<u64>,
    /// The most reasons listed per (node, daemon).
    pub max_reasons: usize,
}

impl Default for AnomalyOptions {
    /// Five-second windows, three reasons.
    fn default() -> Self {
        Self { window_ns: Some(5_000_000_000), max_reasons: 3 }
    }
}

/// Why anomalies could not be computed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnomalyError {
    /// A window of zero nanoseconds.
    #[error("the window width must be greater than zero")]
    ZeroWindow,
    /// The passes of [`StreamedAnomalies`] did not read the same spans (a store changed while
    /// it was read, or spans out of order).
    #[error("the spans changed between the passes over them (a store written while it was read?): run the view again")]
    InputChanged,
}

/// Every (node, daemon) compared with its peers, highest score first.
#[derive(Clone, Debug, PartialEq)]
pub struct Anomalies {
    /// The window width used (`None`: one window over everything).
    pub window_ns: Option<u64>,
    /// One entry per (node, daemon) of every daemon found on two nodes or more, by score
    /// descending, then node, then daemon.
    pub anomalies: Vec<NodeAnomaly>,
    /// Daemons found on a single node, which have no peers to compare with.
    pub unpaired_daemons: Vec<String>,
}

/// One node's daemon compared with the same daemon on the other nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeAnomaly {
    /// The node.
    pub node: String,
    /// The daemon.
    pub daemon: String,
    /// `mix_bits + latency`: see the [module docs](self).
    pub score: f64,
    /// The method-mix part of the score: window-weighted Jensen–Shannon divergence, bits.
    pub mix_bits: f64,
    /// The latency part of the score: share- and δ-weighted doublings.
    pub latency: f64,
    /// Spans of this daemon on this node that were compared (those in windows with a peer).
    pub spans: u64,
    /// The score of each window the node was compared in, by time.
    pub windows: Vec<WindowScore>,
    /// The methods that explain the score, largest contribution first.
    pub reasons: Vec<AnomalyReason>,
}

/// A node's score in one window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowScore {
    /// Start of the window, Unix nanoseconds.
    pub start_unix_ns: u64,
    /// The node's spans in the window.
    pub spans: u64,
    /// Mix plus latency in this window.
    pub score: f64,
}

/// A method whose share or latency sets a node apart from its peers.
#[derive(Clone, Debug, PartialEq)]
pub struct AnomalyReason {
    /// The method (`target::name`).
    pub method: String,
    /// What differs, with the figures over the whole time range.
    pub kind: ReasonKind,
    /// The part of the node's score this reason carries.
    pub contribution: f64,
    /// The node's spans of this method.
    pub spans: u64,
}

/// What sets a method apart on a node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReasonKind {
    /// The method's share of the node's spans differs from the typical peer's.
    Share {
        /// Percentage of the node's spans that are this method.
        node_percent: f64,
        /// The typical peer's percentage.
        peer_percent: f64,
    },
    /// The method's durations differ from the peers'.
    Latency {
        /// The node's median duration, nanoseconds (`NaN` when it ran the method once only).
        node_median_ns: f64,
        /// The typical peer's median duration, nanoseconds (`NaN` when unknown).
        peer_median_ns: f64,
        /// Percentage of (node span, peer span) pairs where the node's span is slower, ties
        /// counted half.
        slower_percent: f64,
    },
}

impl AnomalyReason {
    /// One line for people, e.g. `median 15.2 ms vs 48.0 µs on a typical peer (317× slower;
    /// slower in 100% of span pairs), 12 spans`.
    pub fn detail(&self) -> String {
        match self.kind {
            ReasonKind::Share { node_percent, peer_percent } => format!(
                "{node_percent:.1}% of this node's spans vs {peer_percent:.1}% on a typical peer \
                 ({:+.1} points), {} spans",
                node_percent - peer_percent,
                self.spans
            ),
            ReasonKind::Latency { node_median_ns, peer_median_ns, slower_percent } => {
                let figures = if node_median_ns.is_finite() && peer_median_ns.is_finite() {
                    let (n, p) = (node_median_ns.max(1.0), peer_median_ns.max(1.0));
                    let ratio = if n >= p {
                        format!("{:.1}× slower", n / p)
                    } else {
                        format!("{:.1}× faster", p / n)
                    };
                    format!(
                        "median {} vs {} on a typical peer ({ratio}; ",
                        duration(node_median_ns as u64),
                        duration(peer_median_ns as u64)
                    )
                } else {
                    "latency differs from the peers (".to_owned()
                };
                format!("{figures}slower in {slower_percent:.0}% of span pairs), {} spans", self.spans)
            }
        }
    }
}

/// One span reduced to what the comparison needs. Records sort by daemon, window, node, method
/// and duration, in that order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Record {
    daemon: u32,
    window: u64,
    node: u32,
    method: u32,
    duration_ns: u64,
}

/// One node's spans in a comparison: each method with its durations.
struct NodeSamples {
    node: u32,
    methods: Vec<MethodSamples>,
}

/// One method's spans on one node: how many, and their durations, sorted, when known (a
/// store's overall figures read the durations only of the methods the reasons quote for
/// latency).
struct MethodSamples {
    method: u32,
    count: u64,
    durations_ns: Vec<u64>,
    known: bool,
}

/// What a node's durations of one method are compared with: the typical peer's median and
/// every active node's durations pooled, sorted.
struct LatencyReference {
    typical_median_ns: f64,
    pooled_ns: Vec<u64>,
}

/// Figures of one (node, method) in one comparison.
#[derive(Clone, Copy, Debug, Default)]
struct MethodFigures {
    count: u64,
    node_share: f64,
    peer_share: f64,
    share_term: f64,
    node_median_ns: f64,
    peer_median_ns: f64,
    delta: f64,
    latency_term: f64,
    latency_compared: bool,
}

/// One node's result in one comparison (a window, or the whole range).
#[derive(Debug, Default)]
struct NodeFigures {
    node: u32,
    spans: u64,
    methods: Vec<(u32, MethodFigures)>,
}

/// The daemons and the nodes that run them.
struct Peers {
    /// The daemons found on two nodes or more, by name, each with its nodes by name.
    daemons: Vec<(String, Vec<String>)>,
    /// Daemon, as the builder numbered it → its index in `daemons`, when paired.
    daemon_index: Vec<Option<u32>>,
    /// (index in `daemons`, node as the builder numbered it) → the node's index among the
    /// daemon's nodes.
    node_index: HashMap<(u32, u32), u32>,
    /// The daemons found on one node only, by name.
    unpaired: Vec<String>,
}

/// Every span compared, with the methods its records index and the start of window 0.
struct Records {
    records: Vec<Record>,
    methods: Vec<String>,
    window_origin: u64,
}

/// One (daemon, node)'s window scores, summed weighted by its spans in each window.
#[derive(Default)]
struct Accumulator {
    weight: u64,
    mix: f64,
    latency: f64,
    windows: Vec<WindowScore>,
    share_terms: HashMap<u32, f64>,
    latency_terms: HashMap<u32, f64>,
}

/// A method's term of a node's score, a candidate reason.
struct Candidate {
    contribution: f64,
    method: u32,
    is_latency: bool,
}

/// Compares each (node, daemon) with the same daemon on the other nodes; see the
/// [module docs](self). Copies of a span count once.
pub fn anomalies(data: &Dataset, options: &AnomalyOptions) -> Result<Anomalies, AnomalyError> {
    if options.window_ns == Some(0) {
        return Err(AnomalyError::ZeroWindow);
    }
    let copies = data.copies();
    let mut builder = AnomalyBuilder::default();
    for span in data.spans.iter().zip(&copies).filter(|(_, &copy)| !copy).map(|(s, _)| s) {
        builder.add(&span.daemon, &span.node, &span.method(), span.start_unix_ns, span.duration_ns());
    }
    builder.finish(options)
}

/// The spans [`anomalies`] compares, added one at a time (from a dataset, or from a store's
/// columns as they stream), each reduced to its daemon, node, method, start and duration.
/// The result does not depend on the order spans are added in.
#[derive(Debug, Default)]
pub struct AnomalyBuilder {
    daemons: Names,
    nodes: Names,
    methods: Names,
    /// One per span, with the daemon, node and method numbered as first added and the start in
    /// place of the window; [`finish`](Self::finish) renumbers them.
    records: Vec<Record>,
}

/// Names numbered as first added.
#[derive(Debug, Default)]
struct Names {
    index: HashMap<String, u32>,
    names: Vec<String>,
}

impl Names {
    fn number(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.index.insert(name.to_owned(), i);
        self.names.push(name.to_owned());
        i
    }

    /// Each name's rank in sorted order, by number.
    fn ranks(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.names.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.names[a as usize].cmp(&self.names[b as usize]));
        let mut rank = vec![0; order.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
        rank
    }
}

impl AnomalyBuilder {
    /// Adds a span of `daemon` on `node` running `method` (its `target::name`, as
    /// [`Span::method`](crate::Span::method) writes it), starting at `start_unix_ns` and lasting `duration_ns`.
    pub fn add(&mut self, daemon: &str, node: &str, method: &str, start_unix_ns: u64, duration_ns: u64) {
        let record = Record {
            daemon: self.daemons.number(daemon),
            window: start_unix_ns,
            node: self.nodes.number(node),
            method: self.methods.number(method),
            duration_ns,
        };
        self.records.push(record);
    }

    /// Compares every (node, daemon) added with its peers.
    ///
    /// # Errors
    /// A window of zero nanoseconds.
    pub fn finish(self, options: &AnomalyOptions) -> Result<Anomalies, AnomalyError> {
        if options.window_ns == Some(0) {
            return Err(AnomalyError::ZeroWindow);
        }
        let peers = self.peers();
        let Records { mut records, methods, window_origin } = self.records(&peers, options.window_ns);
        let acc = accumulate_windows(&records, &peers, window_origin, options.window_ns);
        let overall = overall_figures(&mut records);
        Ok(results(&peers.daemons, acc, &methods, &overall, peers.unpaired, options))
    }

    /// Groups the nodes by the daemons they run and numbers both, by name.
    fn peers(&self) -> Peers {
        let mut nodes_of: BTreeMap<&str, BTreeMap<&str, u32>> = BTreeMap::new();
        let mut seen = std::collections::HashSet::new();
        for r in &self.records {
            if seen.insert((r.daemon, r.node)) {
                let (daemon, node) =
                    (&self.daemons.names[r.daemon as usize], &self.nodes.names[r.node as usize]);
                nodes_of.entry(daemon.as_str()).or_default().insert(node.as_str(), 0);
            }
        }
        let mut unpaired = Vec::new();
        let mut daemons: Vec<(String, Vec<String>)> = Vec::new();
        // Daemon (as first numbered) → its index in `daemons`; node → its index among the daemon's.
        let mut daemon_index = vec![None; self.daemons.names.len()];
        let mut node_index = HashMap::new();
        for (daemon, nodes) in nodes_of {
            if nodes.len() < 2 {
                unpaired.push(daemon.to_owned());
                continue;
            }
            let d = daemons.len() as u32;
            daemon_index[self.daemons.index[daemon] as usize] = Some(d);
            for (i, node) in nodes.keys().enumerate() {
                node_index.insert((d, self.nodes.index[*node]), i as u32);
            }
            daemons.push((daemon.to_owned(), nodes.keys().map(|n| (*n).to_owned()).collect()));
        }
        Peers { daemons, daemon_index, node_index, unpaired }
    }

    /// Renumbers every span of a paired daemon as its [`Record`] (daemon and node by
    /// [`Peers`], method by name, start as its window), sorted; windows count from the window
    /// holding the first such span.
    fn records(self, peers: &Peers, window_ns: Option<u64>) -> Records {
        let method_rank = self.methods.ranks();
        let mut records = self.records;
        records.retain(|r| peers.daemon_index[r.daemon as usize].is_some());
        let first_start = records.iter().map(|r| r.window).min().unwrap_or(0);
        let window_origin = window_origin(first_start, window_ns);
        for r in &mut records {
            let d = peers.daemon_index[r.daemon as usize].unwrap_or_default();
            *r = Record {
                daemon: d,
                window: window_ns.map_or(0, |w| (r.window - window_origin) / w),
                node: peers.node_index[&(d, r.node)],
                method: method_rank[r.method as usize],
                duration_ns: r.duration_ns,
            };
        }
        records.sort_unstable();
        let mut methods = self.methods.names;
        methods.sort_unstable();
        Records { records, methods, window_origin }
    }
}

/// [`anomalies`] computed as a Parquet store streams its spans ([`crate::engine`]), holding
/// one window of one daemon at a time rather than a record per span. Three passes:
/// 1. every (daemon, node, method)'s span count and earliest start, from an aggregation
///    ([`new`](Self::new));
/// 2. the spans of the paired daemons ([`paired_daemons`](Self::paired_daemons)) in order of
///    daemon, then start ([`add_in_order`](Self::add_in_order)): each window is compared as it
///    ends;
/// 3. when a reason quotes a method's latency over the whole range
///    ([`end_windows`](Self::end_windows) says so), the durations of those methods
///    ([`wants`](Self::wants), [`add_duration`](Self::add_duration)), which is all the
///    overall figures need besides the counts.
///
/// The result is what [`AnomalyBuilder`] gives for the same spans.
#[derive(Default)]
pub struct StreamedAnomalies {
    options: AnomalyOptions,
    /// The paired daemons, by name, each with its nodes by name.
    daemons: Vec<(String, Vec<String>)>,
    daemon_index: HashMap<String, u32>,
    /// Per paired daemon, its nodes' numbers.
    node_index: Vec<HashMap<String, u32>>,
    /// Every method, by name: a method's number is its rank.
    methods: Vec<String>,
    method_index: HashMap<String, u32>,
    unpaired: Vec<String>,
    window_origin: u64,
    /// Spans per (daemon, node, method) of the paired daemons, over the whole range.
    counts: BTreeMap<(u32, u32, u32), u64>,
    acc: Vec<Vec<Accumulator>>,
    /// The records of the window at hand, and the last window compared.
    group: Vec<Record>,
    last: Option<(u32, u64)>,
    /// The (daemon, method) pairs whose durations the reasons need, once the windows ended.
    wanted: Option<std::collections::HashSet<(u32, u32)>>,
    durations: HashMap<(u32, u32, u32), Vec<u64>>,
}

impl std::fmt::Debug for StreamedAnomalies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamedAnomalies").field("daemons", &self.daemons).finish_non_exhaustive()
    }
}

impl StreamedAnomalies {
    /// From every (daemon, node, method) with its span count and earliest start: `groups`
    /// need not be merged (a method named twice adds up).
    ///
    /// # Errors
    /// A window of zero nanoseconds.
    pub fn new(
        groups: impl IntoIterator<Item = (String, String, String, u64, u64)>,
        options: &AnomalyOptions,
    ) -> Result<Self, AnomalyError> {
        if options.window_ns == Some(0) {
            return Err(AnomalyError::ZeroWindow);
        }
        let groups: Vec<_> = groups.into_iter().collect();
        let mut nodes_of: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
        let mut methods = std::collections::BTreeSet::new();
        for (daemon, node, method, _, _) in &groups {
            nodes_of.entry(daemon).or_default().insert(node);
            methods.insert(method.as_str());
        }
        let mut streamed = StreamedAnomalies { options: *options, ..StreamedAnomalies::default() };
        for (daemon, nodes) in nodes_of {
            if nodes.len() < 2 {
                streamed.unpaired.push(daemon.to_owned());
                continue;
            }
            streamed.daemon_index.insert(daemon.to_owned(), streamed.daemons.len() as u32);
            streamed
                .node_index
                .push(nodes.iter().enumerate().map(|(i, n)| ((*n).to_owned(), i as u32)).collect());
            streamed.daemons.push((daemon.to_owned(), nodes.iter().map(|n| (*n).to_owned()).collect()));
        }
        streamed.methods = methods.iter().map(|m| (*m).to_owned()).collect();
        streamed.method_index =
            streamed.methods.iter().enumerate().map(|(i, m)| (m.clone(), i as u32)).collect();
        let mut first_start = None::<u64>;
        for (daemon, node, method, count, first) in &groups {
            if let Some(key) = streamed.key(daemon, node, method) {
                *streamed.counts.entry(key).or_default() += count;
                first_start = Some(first_start.map_or(*first, |f| f.min(*first)));
            }
        }
        streamed.window_origin = window_origin(first_start.unwrap_or(0), options.window_ns);
        streamed.acc = accumulators(&streamed.daemons);
        Ok(streamed)
    }

    /// The daemons found on two nodes or more: the only ones whose spans are compared.
    pub fn paired_daemons(&self) -> impl Iterator<Item = &str> {
        self.daemons.iter().map(|(d, _)| d.as_str())
    }

    /// The numbers of a paired daemon's (daemon, node, method).
    fn key(&self, daemon: &str, node: &str, method: &str) -> Option<(u32, u32, u32)> {
        let d = *self.daemon_index.get(daemon)?;
        let n = *self.node_index[d as usize].get(node)?;
        Some((d, n, *self.method_index.get(method)?))
    }

    /// Adds a span of a paired daemon; spans come in order of daemon, then start. Returns
    /// whether it was in order and of a (daemon, node, method) the first pass counted: if not,
    /// the passes read different spans and the result would not be the dataset's.
    pub fn add_in_order(
        &mut self,
        daemon: &str,
        node: &str,
        method: &str,
        start_unix_ns: u64,
        duration_ns: u64,
    ) -> bool {
        let Some((d, n, m)) = self.key(daemon, node, method) else { return false };
        let window =
            self.options.window_ns.map_or(0, |w| start_unix_ns.saturating_sub(self.window_origin) / w);
        if self.group.first().is_some_and(|r| (r.daemon, r.window) != (d, window)) {
            self.compare_group();
        }
        if self.last.is_some_and(|last| last >= (d, window)) {
            return false;
        }
        self.group.push(Record { daemon: d, window, node: n, method: m, duration_ns });
        true
    }

    /// Compares the window at hand.
    fn compare_group(&mut self) {
        let Some(first) = self.group.first() else { return };
        let (key, start) = (
            (first.daemon, first.window),
            window_start(self.window_origin, first.window, self.options.window_ns),
        );
        self.group.sort_unstable();
        accumulate(&mut self.acc, &self.group, start);
        self.group.clear();
        self.last = Some(key);
    }

    /// Ends the windows; returns whether a reason quotes a method's latency, whose durations
    /// the third pass then offers.
    pub fn end_windows(&mut self) -> bool {
        self.compare_group();
        let mut wanted = std::collections::HashSet::new();
        let max_reasons = self.options.max_reasons;
        for (d, nodes) in self.acc.iter().enumerate() {
            for a in nodes.iter().filter(|a| a.weight > 0) {
                for c in a.reasons(&self.methods, max_reasons).iter().filter(|c| c.is_latency) {
                    wanted.insert((d as u32, c.method));
                }
            }
        }
        let any = !wanted.is_empty();
        self.wanted = Some(wanted);
        any
    }

    /// Whether the third pass needs the durations of `daemon`'s `method`.
    pub fn wants(&self, daemon: &str, method: &str) -> bool {
        let (Some(&d), Some(&m)) = (self.daemon_index.get(daemon), self.method_index.get(method)) else {
            return false;
        };
        self.wanted.as_ref().is_some_and(|w| w.contains(&(d, m)))
    }

    /// Offers a span's duration, in any order; kept when [`wants`](Self::wants) it.
    pub fn add_duration(&mut self, daemon: &str, node: &str, method: &str, duration_ns: u64) {
        if self.wants(daemon, method) {
            if let Some(key) = self.key(daemon, node, method) {
                self.durations.entry(key).or_default().push(duration_ns);
            }
        }
    }

    /// Every (node, daemon) compared with its peers, as [`AnomalyBuilder::finish`] gives it.
    ///
    /// # Errors
    /// [`AnomalyError::InputChanged`] when the passes did not read the same spans.
    pub fn finish(mut self) -> Result<Anomalies, AnomalyError> {
        if self.wanted.is_none() {
            self.end_windows();
        }
        let wanted = self.wanted.take().unwrap_or_default();
        // The counts hold every span; the durations those of the wanted methods.
        for (key, durations) in &mut self.durations {
            if self.counts.get(key) != Some(&(durations.len() as u64)) {
                return Err(AnomalyError::InputChanged);
            }
            durations.sort_unstable();
        }
        let mut overall = HashMap::new();
        for d in 0..self.daemons.len() as u32 {
            let mut nodes: Vec<NodeSamples> = Vec::new();
            for (&(_, n, m), &count) in self.counts.range((d, 0, 0)..=(d, u32::MAX, u32::MAX)) {
                let known = wanted.contains(&(d, m));
                let durations_ns =
                    if known { self.durations.remove(&(d, n, m)).unwrap_or_default() } else { Vec::new() };
                if known && durations_ns.len() as u64 != count {
                    return Err(AnomalyError::InputChanged);
                }
                let samples = MethodSamples { method: m, count, durations_ns, known };
                match nodes.last_mut() {
                    Some(last) if last.node == n => last.methods.push(samples),
                    _ => nodes.push(NodeSamples { node: n, methods: vec![samples] }),
                }
            }
            for figures in compare_samples(&nodes) {
                for (method, m) in figures.methods {
                    overall.insert((d, figures.node, method), m);
                }
            }
        }
        Ok(results(&self.daemons, self.acc, &self.methods, &overall, self.unpaired, &self.options))
    }
}

/// Compares the nodes of each daemon in each window and sums the scores per (daemon, node).
fn accumulate_windows(
    records: &[Record],
    peers: &Peers,
    window_origin: u64,
    window_ns: Option<u64>,
) -> Vec<Vec<Accumulator>> {
    let mut acc = accumulators(&peers.daemons);
    for group in records.chunk_by(|a, b| (a.daemon, a.window) == (b.daemon, b.window)) {
        accumulate(&mut acc, group, window_start(window_origin, group[0].window, window_ns));
    }
    acc
}

/// The start of window `window`, counted from `window_origin`.
fn window_start(window_origin: u64, window: u64, window_ns: Option<u64>) -> u64 {
    window_origin.saturating_add(window.saturating_mul(window_ns.unwrap_or(0)))
}

/// Where windows start counting: the window holding `first_start`, the earliest start of a
/// span compared.
fn window_origin(first_start: u64, window_ns: Option<u64>) -> u64 {
    match window_ns {
        Some(w) => first_start - first_start % w,
        None => first_start,
    }
}

/// An empty accumulator for every (daemon, node) of `daemons`.
fn accumulators(daemons: &[(String, Vec<String>)]) -> Vec<Vec<Accumulator>> {
    daemons.iter().map(|(_, nodes)| nodes.iter().map(|_| Accumulator::default()).collect()).collect()
}

impl Accumulator {
    /// The node's mix and latency parts of its score, and the score: each part's window
    /// scores weighted by the node's spans in them.
    fn scores(&self) -> (f64, f64, f64) {
        let w = self.weight as f64;
        let (mix_bits, latency) = (self.mix / w, self.latency / w);
        (mix_bits, latency, mix_bits + latency)
    }

    /// The methods that explain the node's score, largest contribution first.
    fn reasons(&self, methods: &[String], max_reasons: usize) -> Vec<Candidate> {
        reasons(self, self.scores().2, methods, max_reasons)
    }

    /// Adds one window's figures, weighted by the node's spans in it.
    fn add(&mut self, start_unix_ns: u64, figures: &NodeFigures) {
        let w = figures.spans as f64;
        let mix: f64 = figures.methods.iter().map(|(_, m)| m.share_term).sum();
        let latency: f64 = figures.methods.iter().map(|(_, m)| m.latency_term).sum();
        self.weight += figures.spans;
        self.mix += w * mix;
        self.latency += w * latency;
        self.windows.push(WindowScore { start_unix_ns, spans: figures.spans, score: mix + latency });
        for (method, m) in &figures.methods {
            *self.share_terms.entry(*method).or_default() += w * m.share_term;
            *self.latency_terms.entry(*method).or_default() += w * m.latency_term;
        }
    }
}

/// Every (node, daemon) of `daemons` (with its nodes) with a score from its accumulated
/// windows `acc`, highest score first; `overall` gives a method's figures over the whole range.
fn results(
    daemons: &[(String, Vec<String>)],
    mut acc: Vec<Vec<Accumulator>>,
    methods: &[String],
    overall: &HashMap<(u32, u32, u32), MethodFigures>,
    unpaired_daemons: Vec<String>,
    options: &AnomalyOptions,
) -> Anomalies {
    let mut out = Vec::new();
    for (d, (daemon, nodes)) in daemons.iter().enumerate() {
        for (n, node) in nodes.iter().enumerate() {
            let a = &mut acc[d][n];
            if a.weight == 0 {
                continue;
            }
            let figures = |m: u32| overall.get(&(d as u32, n as u32, m)).copied().unwrap_or_default();
            out.push(node_anomaly(node, daemon, a, methods, figures, options.max_reasons));
        }
    }
    out.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then_with(|| a.node.cmp(&b.node)).then_with(|| a.daemon.cmp(&b.daemon))
    });
    Anomalies { window_ns: options.window_ns, anomalies: out, unpaired_daemons }
}

/// Adds one (daemon, window)'s records (sorted) to the accumulators, the window starting at
/// `start_unix_ns`.
fn accumulate(acc: &mut [Vec<Accumulator>], group: &[Record], start_unix_ns: u64) {
    for figures in compare(group) {
        acc[group[0].daemon as usize][figures.node as usize].add(start_unix_ns, &figures);
    }
}

/// The figures of every (daemon, node, method) with the whole range as one window, which the
/// reasons quote. Moves every record to window 0.
fn overall_figures(records: &mut [Record]) -> HashMap<(u32, u32, u32), MethodFigures> {
    for r in records.iter_mut() {
        r.window = 0;
    }
    records.sort_unstable();
    let mut overall = HashMap::new();
    for group in records.chunk_by(|a, b| a.daemon == b.daemon) {
        for figures in compare(group) {
            for (method, m) in figures.methods {
                overall.insert((group[0].daemon, figures.node, method), m);
            }
        }
    }
    overall
}

/// One (node, daemon)'s result from its accumulated windows (which it takes); `overall` gives
/// a method's figures over the whole range.
fn node_anomaly(
    node: &str,
    daemon: &str,
    a: &mut Accumulator,
    methods: &[String],
    overall: impl Fn(u32) -> MethodFigures,
    max_reasons: usize,
) -> NodeAnomaly {
    let (mix_bits, latency, score) = a.scores();
    let reasons = a
        .reasons(methods, max_reasons)
        .into_iter()
        .map(|c| {
            let f = overall(c.method);
            AnomalyReason {
                method: methods[c.method as usize].clone(),
                kind: reason_kind(&f, c.is_latency),
                contribution: c.contribution,
                spans: f.count,
            }
        })
        .collect();
    NodeAnomaly {
        node: node.to_owned(),
        daemon: daemon.to_owned(),
        score,
        mix_bits,
        latency,
        spans: a.weight,
        windows: std::mem::take(&mut a.windows),
        reasons,
    }
}

/// The terms that carry at least [`REASON_MIN_FRACTION`] of `score`, largest first, at most
/// `max_reasons` of them.
fn reasons(a: &Accumulator, score: f64, methods: &[String], max_reasons: usize) -> Vec<Candidate> {
    let w = a.weight as f64;
    let term = |is_latency: bool| {
        move |(&method, &t): (&u32, &f64)| Candidate { contribution: t / w, method, is_latency }
    };
    let mut candidates: Vec<Candidate> = a
        .share_terms
        .iter()
        .map(term(false))
        .chain(a.latency_terms.iter().map(term(true)))
        .filter(|c| c.contribution > 0.0 && c.contribution >= REASON_MIN_FRACTION * score)
        .collect();
    candidates.sort_by(|a, b| {
        b.contribution
            .total_cmp(&a.contribution)
            .then_with(|| methods[a.method as usize].cmp(&methods[b.method as usize]))
            .then(a.is_latency.cmp(&b.is_latency))
    });
    candidates.truncate(max_reasons);
    candidates
}

/// What a reason quotes from a method's figures over the whole range.
fn reason_kind(f: &MethodFigures, is_latency: bool) -> ReasonKind {
    if is_latency {
        let compared = f.latency_compared;
        ReasonKind::Latency {
            node_median_ns: if compared { f.node_median_ns } else { f64::NAN },
            peer_median_ns: if compared { f.peer_median_ns } else { f64::NAN },
            slower_percent: (f.delta + 1.0) * 50.0,
        }
    } else {
        ReasonKind::Share { node_percent: f.node_share * 100.0, peer_percent: f.peer_share * 100.0 }
    }
}

/// Compares the nodes of one daemon over `records` (one daemon, one window, sorted by node,
/// method and duration). Nodes without an active peer get nothing.
fn compare(records: &[Record]) -> Vec<NodeFigures> {
    compare_samples(&node_samples(records))
}

/// Compares `nodes` (one daemon's, each with its methods by number): what [`compare`] does
/// once the records are grouped.
fn compare_samples(nodes: &[NodeSamples]) -> Vec<NodeFigures> {
    if nodes.len() < 2 {
        return Vec::new();
    }
    let mut all_methods: Vec<u32> = nodes.iter().flat_map(|n| n.methods.iter().map(|m| m.method)).collect();
    all_methods.sort_unstable();
    all_methods.dedup();
    let shares: Vec<Vec<f64>> = nodes.iter().map(|n| shares(n, &all_methods)).collect();
    let typical = typical_mix(&shares, all_methods.len());
    let latency = latency_references(nodes, &all_methods);
    nodes
        .iter()
        .zip(&shares)
        .map(|(samples, share)| node_figures(samples, share, &typical, &all_methods, &latency))
        .collect()
}

/// `records` (sorted) grouped by node, then by method.
fn node_samples(records: &[Record]) -> Vec<NodeSamples> {
    records
        .chunk_by(|a, b| a.node == b.node)
        .map(|by_node| NodeSamples {
            node: by_node[0].node,
            methods: by_node
                .chunk_by(|a, b| a.method == b.method)
                .map(|by_method| MethodSamples {
                    method: by_method[0].method,
                    count: by_method.len() as u64,
                    durations_ns: by_method.iter().map(|r| r.duration_ns).collect(),
                    known: true,
                })
                .collect(),
        })
        .collect()
}

/// Each of `all_methods`' share of the node's spans.
fn shares(samples: &NodeSamples, all_methods: &[u32]) -> Vec<f64> {
    let total: u64 = samples.methods.iter().map(|m| m.count).sum();
    let mut v = vec![0.0; all_methods.len()];
    for m in &samples.methods {
        v[local_index(all_methods, m.method)] = m.count as f64 / total.max(1) as f64;
    }
    v
}

/// The typical peer's mix: per method, the median share over the nodes, renormalised.
fn typical_mix(shares: &[Vec<f64>], methods: usize) -> Vec<f64> {
    let mut typical: Vec<f64> = (0..methods)
        .map(|i| median_f64(&mut shares.iter().map(|s| s[i]).collect::<Vec<_>>()).unwrap_or(0.0))
        .collect();
    let typical_sum: f64 = typical.iter().sum();
    if typical_sum > 0.0 {
        typical.iter_mut().for_each(|x| *x /= typical_sum);
    }
    typical
}

/// Per method that two nodes or more ran [`MIN_REFERENCE_SPANS`] times: the typical peer's
/// median and every node's durations pooled.
fn latency_references(nodes: &[NodeSamples], all_methods: &[u32]) -> HashMap<u32, LatencyReference> {
    let mut latency = HashMap::new();
    for &m in all_methods {
        let samples: Vec<&MethodSamples> =
            nodes.iter().filter_map(|n| n.methods.iter().find(|s| s.method == m)).collect();
        if samples.iter().any(|s| !s.known) {
            continue;
        }
        let samples: Vec<&Vec<u64>> = samples.iter().map(|s| &s.durations_ns).collect();
        let mut medians: Vec<f64> = samples
            .iter()
            .filter(|d| d.len() >= MIN_REFERENCE_SPANS)
            .filter_map(|d| median_sorted(d))
            .collect();
        if medians.len() < 2 {
            continue;
        }
        let typical_median_ns = median_f64(&mut medians).unwrap_or(0.0);
        let mut pooled_ns: Vec<u64> = samples.iter().flat_map(|d| d.iter().copied()).collect();
        pooled_ns.sort_unstable();
        latency.insert(m, LatencyReference { typical_median_ns, pooled_ns });
    }
    latency
}

/// One node's figures per method: its share term, and its latency term where it can be judged.
fn node_figures(
    samples: &NodeSamples,
    share: &[f64],
    typical: &[f64],
    all_methods: &[u32],
    latency: &HashMap<u32, LatencyReference>,
) -> NodeFigures {
    let terms = js_terms(share, typical);
    let spans: u64 = samples.methods.iter().map(|m| m.count).sum();
    let mut methods: Vec<(u32, MethodFigures)> = samples
        .methods
        .iter()
        .map(|s| {
            let i = local_index(all_methods, s.method);
            let mut f = MethodFigures {
                count: s.count,
                node_share: share[i],
                peer_share: typical[i],
                share_term: terms[i],
                node_median_ns: median_sorted(&s.durations_ns).unwrap_or(f64::NAN),
                ..Default::default()
            };
            if let Some(reference) = latency.get(&s.method).filter(|_| s.known) {
                compare_latency(&mut f, &s.durations_ns, reference, share[i]);
            }
            (s.method, f)
        })
        .collect();
    // Methods the typical peer runs and this node does not are part of the mix too.
    for (i, &m) in all_methods.iter().enumerate() {
        if share[i] == 0.0 && terms[i] > 0.0 {
            let f = MethodFigures {
                peer_share: typical[i],
                share_term: terms[i],
                node_median_ns: f64::NAN,
                ..Default::default()
            };
            methods.push((m, f));
        }
    }
    NodeFigures { node: samples.node, spans, methods }
}

/// Fills in the latency term of `f` when the node ran the method [`MIN_LATENCY_SPANS`] times
/// and a peer ran it too.
fn compare_latency(f: &mut MethodFigures, durations_ns: &[u64], reference: &LatencyReference, share: f64) {
    if durations_ns.len() < MIN_LATENCY_SPANS || reference.pooled_ns.len() <= durations_ns.len() {
        return;
    }
    let peers = without(&reference.pooled_ns, durations_ns);
    f.delta = cliffs_delta(durations_ns, &peers);
    f.peer_median_ns = reference.typical_median_ns;
    let doublings = (f.node_median_ns.max(1.0) / reference.typical_median_ns.max(1.0)).log2().abs();
    f.latency_term = share * f.delta.abs() * doublings;
    f.latency_compared = true;
}

/// The index of method `m` in `all_methods` (sorted).
fn local_index(all_methods: &[u32], m: u32) -> usize {
    all_methods.binary_search(&m).unwrap_or(0)
}

/// `all` (sorted) without one occurrence of each value of `some` (sorted, a sub-multiset).
fn without(all: &[u64], some: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(all.len().saturating_sub(some.len()));
    let mut j = 0;
    for &x in all {
        if j < some.len() && some[j] == x {
            j += 1;
        } else {
            out.push(x);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon on three nodes, one of them slow at `read`, and a daemon on one node: the
    /// streamed passes give what the builder gives, latency reasons included, with windows and
    /// without.
    #[test]
    fn streamed_anomalies_equal_the_builders() {
        // (daemon, node, method, start, duration)
        let mut spans = Vec::new();
        for i in 0..600u64 {
            let node = ["node-0", "node-1", "node-2"][(i % 3) as usize];
            let method = ["read", "write", "demo::rpc::GET"][(i / 3 % 3) as usize];
            let slow = if node == "node-2" && method == "read" { 4 } else { 1 };
            let duration = (1_000 + (i * 7919) % 500) * slow;
            spans.push(("worker", node, method.to_owned(), 1_000_000_000 + i * 10_000_000, duration));
            if i % 5 == 0 {
                spans.push(("solo", "node-0", "tick".to_owned(), 1_000_000_000 + i * 10_000_000, 10));
            }
        }
        for window_ns in [None, Some(1_000_000_000), Some(333_333_333)] {
            let options = AnomalyOptions { window_ns, max_reasons: 3 };
            let mut builder = AnomalyBuilder::default();
            for (d, n, m, start, duration) in &spans {
                builder.add(d, n, m, *start, *duration);
            }
            let expected = builder.finish(&options).unwrap();

            let mut groups: BTreeMap<(&str, &str, &str), (u64, u64)> = BTreeMap::new();
            for (d, n, m, start, _) in &spans {
                let g = groups.entry((d, n, m)).or_insert((0, u64::MAX));
                *g = (g.0 + 1, g.1.min(*start));
            }
            let groups = groups
                .into_iter()
                .map(|((d, n, m), (count, first))| (d.into(), n.into(), m.into(), count, first));
            let mut streamed = StreamedAnomalies::new(groups, &options).unwrap();
            assert_eq!(streamed.paired_daemons().collect::<Vec<_>>(), ["worker"]);
            let mut ordered: Vec<_> = spans.iter().filter(|s| s.0 == "worker").collect();
            ordered.sort_by_key(|s| (s.0, s.3));
            for (d, n, m, start, duration) in ordered {
                assert!(streamed.add_in_order(d, n, m, *start, *duration));
            }
            // Windows of a third of a second hold too few spans of a method to judge latency.
            let judged = window_ns != Some(333_333_333);
            assert_eq!(streamed.end_windows(), judged, "whether a latency reason wants its durations");
            for (d, n, m, _, duration) in spans.iter().rev() {
                streamed.add_duration(d, n, m, *duration);
            }
            let got = streamed.finish().unwrap();
            assert_eq!(got, expected, "{window_ns:?}");
            let slow = got.anomalies.iter().find(|a| a.node == "node-2").unwrap();
            let latency = slow
                .reasons
                .iter()
                .any(|r| r.method == "read" && matches!(r.kind, ReasonKind::Latency { .. }));
            assert_eq!(latency, judged, "{slow:?}");
        }
    }

    #[test]
    fn streamed_anomalies_refuse_spans_out_of_order_or_unknown() {
        let options = AnomalyOptions::default();
        let groups = ["a", "b"].map(|n| ("d".to_owned(), n.to_owned(), "m".to_owned(), 1, 10));
        let mut streamed = StreamedAnomalies::new(groups.clone(), &options).unwrap();
        assert!(streamed.add_in_order("d", "a", "m", 10_000_000_000, 1));
        assert!(streamed.add_in_order("d", "b", "m", 20_000_000_000, 1));
        assert!(!streamed.add_in_order("d", "a", "m", 10, 1), "a window already compared");
        assert!(!streamed.add_in_order("d", "c", "m", 30_000_000_000, 1), "a node the counts lack");
        let mut streamed = StreamedAnomalies::new(groups, &options).unwrap();
        streamed.add_in_order("d", "a", "m", 10, 1);
        streamed.add_in_order("d", "b", "m", 10, 1);
        assert!(!streamed.end_windows());
        assert_eq!(
            StreamedAnomalies::new(Vec::new(), &AnomalyOptions { window_ns: Some(0), max_reasons: 1 })
                .unwrap_err(),
            AnomalyError::ZeroWindow
        );
    }

    #[test]
    fn without_removes_one_occurrence_each() {
        assert_eq!(without(&[1, 2, 2, 3, 5], &[2, 5]), vec![1, 2, 3]);
        assert_eq!(without(&[1, 1], &[]), vec![1, 1]);
    }
}
