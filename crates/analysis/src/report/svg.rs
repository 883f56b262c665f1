//! Charts drawn on the server side as inline SVG: the flame graph, the critical paths, the
//! dependency graph and bar charts. Every chart is an `<svg data-chart="…">` whose drawn
//! marks carry the class `mark`, so the page's script can tell an empty chart from a drawn one.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::{PathStep, SlowRequest};
use crate::deps::{DependencyGraph, DependencyLink};
use crate::flame::{FlameGraph, Frame};
use crate::markup::escape;
use crate::time_format::duration;

/// Distinct colours for the largest categories.
const PALETTE: [&str; 12] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
    "#7f7f7f", "#393b79", "#637939",
];

/// A stable colour for `key`: its hue from a hash, saturation and lightness fixed.
pub(super) fn color(key: &str, lightness: u32) -> String {
    let h = key.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    format!("hsl({}, 62%, {}%)", h % 360, lightness)
}

/// The flame graph, root at the bottom; frames coloured by daemon, tooltips with total and self
/// time. `None` when the graph holds no time.
pub(super) fn flame(graph: &FlameGraph) -> Option<String> {
    let total = graph.total_ns();
    if total == 0 || graph.frames.len() < 2 {
        return None;
    }
    let chart = FlameChart::place(graph, total);
    let height = chart.height;
    let mut svg = format!(
        "<svg class=\"chart flame\" data-chart=\"flame-graph\" viewBox=\"0 0 {width} {height}\" \
         width=\"100%\" role=\"img\" aria-label=\"flame graph of span time\">",
        width = FlameChart::WIDTH
    );
    for (i, frame) in graph.frames.iter().enumerate() {
        chart.frame(&mut svg, i, frame);
    }
    svg.push_str("</svg>");
    Some(svg)
}

/// Where the flame graph draws each frame.
struct FlameChart {
    /// The graph's total time, nanoseconds: the chart's full width.
    total_ns: u64,
    /// Each frame's row, 0 for the root.
    depth: Vec<usize>,
    /// Each frame's left edge.
    x: Vec<f64>,
    /// The chart's height.
    height: f64,
}

impl FlameChart {
    const WIDTH: f64 = 1200.0;
    const ROW: f64 = 18.0;

    /// Rows by depth; children from their parent's left edge, in the graph's (name) order.
    fn place(graph: &FlameGraph, total_ns: u64) -> Self {
        let n = graph.frames.len();
        let mut depth = vec![0usize; n];
        let mut x = vec![0f64; n];
        for i in 1..n {
            let p = graph.frames[i].parent.unwrap_or(0);
            depth[i] = depth[p] + 1;
        }
        for i in 0..n {
            let mut at = x[i];
            for &c in &graph.frames[i].children {
                x[c] = at;
                at += graph.frames[c].total_ns as f64 / total_ns as f64 * Self::WIDTH;
            }
        }
        let max_depth = depth.iter().copied().max().unwrap_or(0);
        let height = (max_depth + 1) as f64 * Self::ROW + 4.0;
        Self { total_ns, depth, x, height }
    }

    /// Frame `i` with its tooltip, and its name when it fits; nothing when it is too narrow.
    fn frame(&self, svg: &mut String, i: usize, f: &Frame) {
        let total = self.total_ns;
        let w = f.total_ns as f64 / total as f64 * Self::WIDTH;
        if w < 0.3 {
            return;
        }
        let y = self.height - 2.0 - (self.depth[i] + 1) as f64 * Self::ROW;
        let daemon = f.name.split('/').next().unwrap_or("");
        let fill = if i == 0 { "hsl(0, 0%, 80%)".to_owned() } else { color(daemon, 68) };
        let percent = f.total_ns as f64 * 100.0 / total as f64;
        let tip = format!(
            "{} — total {} ({percent:.1}%), self {}, {} spans",
            f.name,
            duration(f.total_ns),
            duration(f.self_ns),
            f.spans
        );
        let _ = write!(
            svg,
            "<g><title>{}</title><rect class=\"mark\" x=\"{:.2}\" y=\"{y:.1}\" width=\"{:.2}\" height=\"{}\" \
             fill=\"{fill}\" rx=\"2\"/>",
            escape(&tip),
            self.x[i],
            (w - 0.5).max(0.3),
            Self::ROW - 1.0
        );
        // About 7 px per character at 12 px.
        let chars = ((w - 6.0) / 7.0).floor();
        if chars >= 3.0 {
            let label = shorten(&f.name, chars as usize);
            let _ = write!(
                svg,
                "<text x=\"{:.2}\" y=\"{:.1}\">{}</text>",
                self.x[i] + 3.0,
                y + Self::ROW - 5.0,
                escape(&label)
            );
        }
        svg.push_str("</g>");
    }
}

/// `s` cut to `max` characters with an ellipsis.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let keep: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{keep}…")
}

/// The critical-path chart and the legend of its colours.
pub(super) struct CriticalPathChart {
    /// The `<svg>` element.
    pub(super) svg: String,
    /// The methods on the paths, most time first.
    pub(super) legend: Vec<LegendEntry>,
}

/// A method in the critical-path chart's legend.
pub(super) struct LegendEntry {
    /// `daemon/method`.
    pub(super) key: String,
    /// Its time on the paths, nanoseconds.
    pub(super) on_path_ns: u64,
    /// Its colour in the chart.
    pub(super) colour: String,
}

/// The critical paths of the slowest requests: one row each on a common time scale from each
/// request's start, sections coloured by method; and the methods' legend with their time on the
/// paths. `None` when there is no section.
pub(super) fn critical_paths(requests: &[SlowRequest]) -> Option<CriticalPathChart> {
    let longest_ns = requests.iter().map(|r| r.duration_ns).max().unwrap_or(0);
    if longest_ns == 0 || requests.iter().all(|r| r.path.is_empty()) {
        return None;
    }
    let legend = path_legend(requests);
    let chart = PathChart {
        longest_ns,
        colour_of: legend.iter().map(|e| (e.key.as_str(), e.colour.as_str())).collect(),
    };
    let height = requests.len() as f64 * PathChart::ROW + 50.0;
    let mut svg = format!(
        "<svg class=\"chart\" data-chart=\"critical-paths\" viewBox=\"0 0 {width} {height}\" width=\"100%\" \
         role=\"img\" aria-label=\"critical paths of the slowest requests\">",
        width = PathChart::WIDTH
    );
    for (row, r) in requests.iter().enumerate() {
        chart.request(&mut svg, row as f64 * PathChart::ROW + 4.0, r);
    }
    chart.time_axis(&mut svg, requests.len());
    svg.push_str("</svg>");
    Some(CriticalPathChart { svg, legend })
}

/// The methods on the paths with their time, coloured by rank of that time so the biggest parts
/// are the easiest to tell apart.
fn path_legend(requests: &[SlowRequest]) -> Vec<LegendEntry> {
    let mut on_path: BTreeMap<String, u64> = BTreeMap::new();
    for step in requests.iter().flat_map(|r| &r.path) {
        let e = on_path.entry(format!("{}/{}", step.daemon, step.method)).or_default();
        *e = e.saturating_add(step.end_unix_ns - step.start_unix_ns);
    }
    let mut legend: Vec<LegendEntry> = on_path
        .into_iter()
        .map(|(key, on_path_ns)| LegendEntry { key, on_path_ns, colour: String::new() })
        .collect();
    legend.sort_by(|a, b| b.on_path_ns.cmp(&a.on_path_ns).then_with(|| a.key.cmp(&b.key)));
    for (i, entry) in legend.iter_mut().enumerate() {
        entry.colour = PALETTE.get(i).map_or_else(|| "#b0b6be".to_owned(), |c| (*c).to_owned());
    }
    legend
}

/// The critical-path chart's time scale and colours.
struct PathChart<'a> {
    /// The slowest request's duration: the plot's full width.
    longest_ns: u64,
    /// Colour by `daemon/method`.
    colour_of: BTreeMap<&'a str, &'a str>,
}

impl PathChart<'_> {
    const LABEL: f64 = 190.0;
    const WIDTH: f64 = 1200.0;
    const ROW: f64 = 30.0;
    const PLOT: f64 = Self::WIDTH - Self::LABEL - 40.0;

    /// The width that `ns` takes on the plot.
    fn width_of(&self, ns: u64) -> f64 {
        ns as f64 / self.longest_ns as f64 * Self::PLOT
    }

    /// One request's row at `y`: its name and latency, its duration as a background bar, and
    /// the sections of its path.
    fn request(&self, svg: &mut String, y: f64, r: &SlowRequest) {
        let name = r.request_id.clone().unwrap_or_else(|| r.trace_id[..8.min(r.trace_id.len())].to_owned());
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{} · {}</text>",
            Self::LABEL - 8.0,
            y + Self::ROW / 2.0 + 1.0,
            escape(&name),
            duration(r.duration_ns)
        );
        let _ = write!(
            svg,
            "<rect x=\"{label}\" y=\"{:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"#eef0f3\"/>",
            y + 4.0,
            self.width_of(r.duration_ns),
            Self::ROW - 8.0,
            label = Self::LABEL
        );
        for step in &r.path {
            self.section(svg, y, r, step);
        }
    }

    /// One section of a request's path, placed from the request's start.
    fn section(&self, svg: &mut String, y: f64, r: &SlowRequest, step: &PathStep) {
        let x0 = Self::LABEL + self.width_of(step.start_unix_ns.saturating_sub(r.start_unix_ns));
        let w = self.width_of(step.end_unix_ns - step.start_unix_ns);
        let key = format!("{}/{}", step.daemon, step.method);
        let tip = format!(
            "{} on {}: {} ({} after the request started)",
            key,
            step.node,
            duration(step.end_unix_ns - step.start_unix_ns),
            duration(step.start_unix_ns.saturating_sub(r.start_unix_ns))
        );
        let _ = write!(
            svg,
            "<rect class=\"mark\" x=\"{x0:.2}\" y=\"{:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>",
            y + 4.0,
            w.max(0.5),
            Self::ROW - 8.0,
            self.colour_of.get(key.as_str()).copied().unwrap_or("#b0b6be"),
            escape(&tip)
        );
    }

    /// The time axis under `rows` requests: a line, five ticks and its label.
    fn time_axis(&self, svg: &mut String, rows: usize) {
        let (label, plot) = (Self::LABEL, Self::PLOT);
        let axis_y = rows as f64 * Self::ROW + 8.0;
        let _ = write!(
            svg,
            "<line x1=\"{label}\" y1=\"{axis_y}\" x2=\"{:.1}\" y2=\"{axis_y}\" stroke=\"#888\"/>",
            label + plot
        );
        for i in 0..=4 {
            let x = label + plot * i as f64 / 4.0;
            let _ = write!(
                svg,
                "<line x1=\"{x:.1}\" y1=\"{axis_y}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#888\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                axis_y + 4.0,
                axis_y + 18.0,
                duration(self.longest_ns / 4 * i)
            );
        }
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"axis-label\">time since the request started</text>",
            label + plot / 2.0,
            axis_y + 36.0
        );
    }
}

/// The daemon dependency graph, laid out in columns by call depth from the daemons nobody
/// calls; edges labelled with their calls (and errors). Calls within a daemon are written in
/// its box. `None` when there are no calls.
pub(super) fn dependencies(
    graph: &DependencyGraph,
    spans_per_daemon: &BTreeMap<String, u64>,
) -> Option<String> {
    if graph.services.is_empty() {
        return None;
    }
    let layout = DependencyLayout::by_depth(&call_depths(graph, spans_per_daemon));
    let (width, height) = (layout.width, layout.height);
    let mut svg = format!(
        "<svg class=\"chart\" data-chart=\"dependency-graph\" viewBox=\"0 0 {width:.0} {height:.0}\" \
         width=\"{width:.0}\" style=\"max-width:100%\" role=\"img\" aria-label=\"dependency graph\">\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" \
         markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#555\"/></marker></defs>"
    );
    let max_calls = graph.services.iter().map(|l| l.call_count).max().unwrap_or(1).max(1) as f64;
    for l in graph.services.iter().filter(|l| l.parent != l.child) {
        layout.edge(&mut svg, l, max_calls);
    }
    for (&d, &at) in &layout.boxes {
        let internal =
            graph.services.iter().find(|l| l.parent == d && l.child == d).map_or(0, |l| l.call_count);
        let spans = spans_per_daemon.get(d).copied().unwrap_or(0);
        DependencyLayout::daemon(&mut svg, d, at, spans, internal);
    }
    svg.push_str("</svg>");
    Some(svg)
}

/// Each daemon's call depth: the longest chain of distinct callers above it (cycles cut by a
/// visit limit). Every daemon with spans or calls is in it.
fn call_depths<'a>(
    graph: &'a DependencyGraph,
    spans_per_daemon: &'a BTreeMap<String, u64>,
) -> BTreeMap<&'a str, usize> {
    let mut daemons: BTreeSet<&str> = spans_per_daemon.keys().map(String::as_str).collect();
    for l in &graph.services {
        daemons.insert(&l.parent);
        daemons.insert(&l.child);
    }
    let callers: BTreeMap<&str, Vec<&str>> =
        graph.services.iter().filter(|l| l.parent != l.child).fold(BTreeMap::new(), |mut m, l| {
            m.entry(l.child.as_str()).or_default().push(l.parent.as_str());
            m
        });
    let mut depth: BTreeMap<&str, usize> = daemons.iter().map(|&d| (d, 0)).collect();
    for _ in 0..daemons.len() {
        let mut changed = false;
        for (&child, parents) in &callers {
            let want = parents.iter().map(|p| depth[p] + 1).max().unwrap_or(0).min(daemons.len());
            if want > depth[child] {
                depth.insert(child, want);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    depth
}

/// A daemon box's top-left corner.
#[derive(Clone, Copy)]
struct Point {
    x: f64,
    y: f64,
}

/// The dependency graph's size and where each daemon's box goes.
struct DependencyLayout<'a> {
    width: f64,
    height: f64,
    boxes: BTreeMap<&'a str, Point>,
}

impl<'a> DependencyLayout<'a> {
    const BOX_W: f64 = 190.0;
    const BOX_H: f64 = 54.0;
    const GAP_X: f64 = 130.0;
    const GAP_Y: f64 = 36.0;

    /// One column per call depth, its boxes centred vertically.
    fn by_depth(depth: &BTreeMap<&'a str, usize>) -> Self {
        let (box_w, box_h, gap_x, gap_y) = (Self::BOX_W, Self::BOX_H, Self::GAP_X, Self::GAP_Y);
        let mut columns: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
        for (&d, &k) in depth {
            columns.entry(k).or_default().push(d);
        }
        let rows = columns.values().map(Vec::len).max().unwrap_or(1);
        let width = columns.len() as f64 * (box_w + gap_x) - gap_x + 40.0;
        let height = rows as f64 * (box_h + gap_y) - gap_y + 40.0;
        let mut boxes: BTreeMap<&str, Point> = BTreeMap::new();
        for (c, (_, list)) in columns.iter().enumerate() {
            let offset = (height - 40.0 - (list.len() as f64 * (box_h + gap_y) - gap_y)) / 2.0;
            for (r, d) in list.iter().enumerate() {
                let x = 20.0 + c as f64 * (box_w + gap_x);
                boxes.insert(d, Point { x, y: 20.0 + offset + r as f64 * (box_h + gap_y) });
            }
        }
        Self { width, height, boxes }
    }

    /// The arrow of a call between two daemons, thicker for more calls, red with errors.
    fn edge(&self, svg: &mut String, l: &DependencyLink, max_calls: f64) {
        let (Some(&Point { x: px, y: py }), Some(&Point { x: cx, y: cy })) =
            (self.boxes.get(l.parent.as_str()), self.boxes.get(l.child.as_str()))
        else {
            return;
        };
        let (box_w, box_h) = (Self::BOX_W, Self::BOX_H);
        let (x1, y1) = (px + box_w, py + box_h / 2.0);
        let (x2, y2) = if cx > px {
            (cx, cy + box_h / 2.0)
        } else {
            (cx + box_w / 2.0, cy + if cy > py { 0.0 } else { box_h })
        };
        let mid = (x1 + x2) / 2.0;
        let stroke = 1.2 + 4.0 * (l.call_count as f64 / max_calls).sqrt();
        let colour = if l.error_count > 0 { "#c0392b" } else { "#555" };
        let label = if l.error_count > 0 {
            format!("{} calls, {} errors", l.call_count, l.error_count)
        } else {
            format!("{} calls", l.call_count)
        };
        let _ = write!(
            svg,
            "<g><title>{} → {}: {}</title><path class=\"mark\" d=\"M {x1:.1} {y1:.1} C {mid:.1} {y1:.1}, {mid:.1} {y2:.1}, {x2:.1} {y2:.1}\" \
             fill=\"none\" stroke=\"{colour}\" stroke-width=\"{stroke:.1}\" marker-end=\"url(#arrow)\"/>\
             <text x=\"{mid:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"edge-label\">{}</text></g>",
            escape(&l.parent),
            escape(&l.child),
            escape(&label),
            (y1 + y2) / 2.0 - 6.0,
            escape(&label)
        );
    }

    /// Daemon `d`'s box at `at`, with its spans and the calls within it.
    fn daemon(svg: &mut String, d: &str, at: Point, spans: u64, internal: u64) {
        let (Point { x, y }, box_w, box_h) = (at, Self::BOX_W, Self::BOX_H);
        let _ = write!(
            svg,
            "<g><title>{}: {spans} spans, {internal} calls within the daemon</title>\
             <rect class=\"mark\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{box_w}\" height=\"{box_h}\" rx=\"6\" fill=\"{}\" stroke=\"#333\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"node-label\">{}</text>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{spans} spans · {internal} internal calls</text></g>",
            escape(d),
            color(d, 85),
            x + box_w / 2.0,
            y + 22.0,
            escape(&shorten(d, 24)),
            x + box_w / 2.0,
            y + 41.0
        );
    }
}

/// One bar of [`bars`].
pub(super) struct Bar {
    /// What the bar counts.
    pub(super) label: String,
    /// The count.
    pub(super) value: u64,
    /// What was lost besides the count, drawn in red after it.
    pub(super) lost: u64,
}

/// Horizontal bars, the lost part of each drawn in red after its value. `None` when every value
/// is zero.
pub(super) fn bars(name: &str, rows: &[Bar], unit: &str) -> Option<String> {
    let max = rows.iter().map(|r| r.value + r.lost).max().unwrap_or(0);
    if max == 0 {
        return None;
    }
    const LABEL: f64 = 160.0;
    const WIDTH: f64 = 720.0;
    const ROW: f64 = 24.0;
    let plot = WIDTH - LABEL - 150.0;
    let height = rows.len() as f64 * ROW + 8.0;
    let mut svg = format!(
        "<svg class=\"chart bars\" data-chart=\"{}\" viewBox=\"0 0 {WIDTH} {height}\" width=\"{WIDTH}\" \
         style=\"max-width:100%\" role=\"img\" aria-label=\"{}\">",
        escape(name),
        escape(name)
    );
    for (i, Bar { label, value, lost }) in rows.iter().enumerate() {
        let y = i as f64 * ROW + 4.0;
        let w = *value as f64 / max as f64 * plot;
        let lw = *lost as f64 / max as f64 * plot;
        let text =
            if *lost > 0 { format!("{value} {unit}, {lost} dropped") } else { format!("{value} {unit}") };
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <rect class=\"mark\" x=\"{LABEL}\" y=\"{:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"#1f5fa8\"><title>{}</title></rect>",
            LABEL - 8.0,
            y + ROW / 2.0 + 4.0,
            escape(&shorten(label, 22)),
            y + 3.0,
            w.max(1.0),
            ROW - 6.0,
            escape(&format!("{label}: {text}"))
        );
        if *lost > 0 {
            let _ = write!(
                svg,
                "<rect class=\"mark lost\" x=\"{:.2}\" y=\"{:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"#c0392b\"/>",
                LABEL + w,
                y + 3.0,
                lw.max(1.0),
                ROW - 6.0
            );
        }
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            LABEL + w + lw + 6.0,
            y + ROW / 2.0 + 4.0,
            escape(&text)
        );
    }
    svg.push_str("</svg>");
    Some(svg)
}
