//! Renderings of a [`DependencyGraph`]: JSON, a table, and Graphviz DOT.

use std::io::{self, Write};

use serde::Serialize;

use crate::deps::{DependencyGraph, DependencyLink};
use crate::text_layout::column_width;

#[derive(Serialize)]
struct LinkJson<'a> {
    parent: &'a str,
    child: &'a str,
    call_count: u64,
    error_count: u64,
    uninstrumented: bool,
}

fn links_json(links: &[DependencyLink]) -> Vec<LinkJson<'_>> {
    links
        .iter()
        .map(|l| LinkJson {
            parent: &l.parent,
            child: &l.child,
            call_count: l.call_count,
            error_count: l.error_count,
            uninstrumented: l.uninstrumented,
        })
        .collect()
}

/// Writes `{"services":[{"parent","child","call_count","error_count","uninstrumented"}],
/// "nodes":[...]}` on one line, links by parent then child; `uninstrumented` marks a child known
/// only from its callers (a database nobody traced).
pub fn write_json(graph: &DependencyGraph, out: &mut dyn Write) -> io::Result<()> {
    #[derive(Serialize)]
    struct Doc<'a> {
        services: Vec<LinkJson<'a>>,
        nodes: Vec<LinkJson<'a>>,
    }
    let doc = Doc { services: links_json(&graph.services), nodes: links_json(&graph.nodes) };
    serde_json::to_writer(&mut *out, &doc)?;
    writeln!(out)
}

/// Writes both graphs as tables: caller, callee, calls, errors; a callee nobody recorded is
/// marked `(not traced)`.
pub fn write_table(graph: &DependencyGraph, out: &mut dyn Write) -> io::Result<()> {
    for (title, links) in [("daemon", &graph.services), ("node", &graph.nodes)] {
        writeln!(out, "{title} dependencies ({} links):", links.len())?;
        let child = |l: &DependencyLink| {
            if l.uninstrumented {
                format!("{} (not traced)", l.child)
            } else {
                l.child.clone()
            }
        };
        let widest = links.iter().flat_map(|l| [l.parent.chars().count(), child(l).chars().count()]).max();
        let w = column_width(widest.unwrap_or(0), 6);
        writeln!(out, "  {:<w$}    {:<w$} {:>8} {:>8}", "caller", "callee", "calls", "errors")?;
        for l in links {
            writeln!(out, "  {:<w$} →  {:<w$} {:>8} {:>8}", l.parent, child(l), l.call_count, l.error_count)?;
        }
    }
    Ok(())
}

/// Which graph [`write_dot`] draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DotLevel {
    /// Daemon → daemon.
    Daemon,
    /// Node → node.
    Node,
}

/// Writes one graph as a Graphviz `digraph`: an edge per link labelled with its call count,
/// and its error count in red when there are errors; a peer nobody recorded is a dashed cylinder.
pub fn write_dot(graph: &DependencyGraph, level: DotLevel, out: &mut dyn Write) -> io::Result<()> {
    let (name, links) = match level {
        DotLevel::Daemon => ("daemons", &graph.services),
        DotLevel::Node => ("nodes", &graph.nodes),
    };
    writeln!(out, "digraph {name} {{")?;
    writeln!(out, "  rankdir=LR;")?;
    writeln!(out, "  node [shape=box];")?;
    let mut untraced: Vec<&str> =
        links.iter().filter(|l| l.uninstrumented).map(|l| l.child.as_str()).collect();
    untraced.sort_unstable();
    untraced.dedup();
    for peer in untraced {
        writeln!(out, "  {} [shape=cylinder, style=dashed];", quote(peer))?;
    }
    for l in links {
        let (label, color) = if l.error_count > 0 {
            (format!("{} calls, {} errors", l.call_count, l.error_count), ", color=red, fontcolor=red")
        } else {
            (format!("{} calls", l.call_count), "")
        };
        writeln!(out, "  {} -> {} [label={}{color}];", quote(&l.parent), quote(&l.child), quote(&label))?;
    }
    writeln!(out, "}}")
}

/// A DOT double-quoted string.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                q.push('\\');
                q.push(c);
            }
            '\n' => q.push_str("\\n"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_quotes_names_and_marks_errors() {
        let graph = DependencyGraph {
            services: vec![DependencyLink {
                parent: "a \"b\"".into(),
                child: "c\\d".into(),
                call_count: 3,
                error_count: 1,
                uninstrumented: false,
            }],
            nodes: vec![],
        };
        let mut out = Vec::new();
        write_dot(&graph, DotLevel::Daemon, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "digraph daemons {\n  rankdir=LR;\n  node [shape=box];\n  \
             \"a \\\"b\\\"\" -> \"c\\\\d\" [label=\"3 calls, 1 errors\", color=red, fontcolor=red];\n}\n"
        );
    }
}
