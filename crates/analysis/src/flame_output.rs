//! Renderings of a [`FlameGraph`]: folded stacks, d3-flame-graph JSON and SVG (by `inferno`).

use std::io::{self, Write};

use serde_json::{json, Value};

use crate::flame::FlameGraph;
use crate::markup::escape;
use crate::time_format::duration;

/// Writes the folded stacks, one `frame;frame;frame self_ns` line per stack with self time, sorted
/// by stack: the format `flamegraph.pl` and `inferno-flamegraph` read. Counts are nanoseconds.
pub fn write_folded(graph: &FlameGraph, out: &mut dyn Write) -> io::Result<()> {
    for (stack, self_ns) in graph.folded() {
        writeln!(out, "{stack} {self_ns}")?;
    }
    Ok(())
}

/// The graph as d3-flame-graph JSON: nested `{"name","value","children"}` from the root
/// `all`, where `value` is the frame's total time in nanoseconds (self time is the value minus
/// the children's values, as d3-flame-graph reads it). The value nests as deep as the graph, and
/// `serde_json` serializes and drops values recursively: for graphs thousands of frames deep,
/// write with [`write_d3_json`], which needs no recursion.
pub fn to_d3_json(graph: &FlameGraph) -> Value {
    if graph.frames.is_empty() {
        return json!({ "name": "all", "value": 0, "children": [] });
    }
    // Built bottom-up, each child moved (not copied) into its parent: linear in the frames.
    let mut built: Vec<Option<Value>> = vec![None; graph.frames.len()];
    for i in (0..graph.frames.len()).rev() {
        let f = &graph.frames[i];
        let children: Vec<Value> = f.children.iter().filter_map(|&c| built.get_mut(c)?.take()).collect();
        let mut frame = serde_json::Map::new();
        frame.insert("name".into(), Value::String(f.name.clone()));
        frame.insert("value".into(), Value::from(f.total_ns));
        frame.insert("children".into(), Value::Array(children));
        built[i] = Some(Value::Object(frame));
    }
    built[0].take().unwrap_or(Value::Null)
}

/// Writes the JSON of [`to_d3_json`] (the text `serde_json::to_writer` makes of it) and a
/// newline, without building the value, at any depth.
pub fn write_d3_json(graph: &FlameGraph, out: &mut dyn Write) -> io::Result<()> {
    if graph.frames.is_empty() {
        return out.write_all(b"{\"name\":\"all\",\"value\":0,\"children\":[]}\n");
    }
    // `Some((frame, first among its siblings))` opens a frame, `None` closes the innermost one.
    let mut steps: Vec<Option<(usize, bool)>> = vec![Some((0, true))];
    while let Some(step) = steps.pop() {
        let Some((i, first)) = step else {
            out.write_all(b"]}")?;
            continue;
        };
        let Some(f) = graph.frames.get(i) else { continue };
        if !first {
            out.write_all(b",")?;
        }
        out.write_all(br#"{"name":"#)?;
        serde_json::to_writer(&mut *out, &f.name)?;
        write!(out, r#","value":{},"children":["#, f.total_ns)?;
        steps.push(None);
        steps.extend(f.children.iter().enumerate().rev().map(|(n, &c)| Some((c, n == 0))));
    }
    writeln!(out)
}

/// Writes the graph as an interactive SVG flame graph (`inferno`): widths are time, the
/// tooltip gives microseconds (each stack's self time rounded up) and the share of the total.
pub fn write_svg(graph: &FlameGraph, title: &str, out: &mut dyn Write) -> io::Result<()> {
    // inferno adds counts in a usize: counts are in microseconds, and in coarser units still
    // when the total would come near 2^52, so no sum can overflow.
    let total = graph.total_ns();
    let unit_ns = (total >> 52).max(1).saturating_mul(1_000);
    let lines: Vec<String> = graph
        .folded()
        .into_iter()
        .filter_map(|(stack, ns)| {
            let count = ns.div_ceil(unit_ns);
            (count > 0).then(|| format!("{stack} {count}"))
        })
        .collect();
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    options.subtitle = Some(format!(
        "{} of span time in {} spans of {} requests; width = total time, self time at the top edge",
        duration(total),
        graph.span_count(),
        graph.requests
    ));
    options.count_name = if unit_ns == 1_000 { "µs".into() } else { format!("× {unit_ns} ns") };
    options.hash = true;
    options.deterministic = true;
    if lines.is_empty() {
        // inferno refuses an empty input; an empty graph is still a valid picture.
        return writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"60\"><text x=\"10\" y=\"30\">{}: no span time in scope</text></svg>",
            escape(title)
        );
    }
    // The writer's error as it is: a closed pipe stays a `BrokenPipe` to the caller.
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
}
