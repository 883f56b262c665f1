//! The span tree of one trace, in display order.

use std::collections::HashSet;
use std::io::{self, Write};

use ringtrace_core::TraceId;

use crate::causality::{request_tree, CausalityOptions, ParentLink};
use crate::model::Dataset;
use crate::text_layout::Indent;
use crate::time_format::duration;

/// One line of a trace tree: a span at a depth, in depth-first order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeLine {
    /// Nesting depth; roots are 0.
    pub depth: usize,
    /// Index into [`Dataset::spans`].
    pub span: usize,
    /// The parent was recorded by a different process: the request crossed a process boundary.
    pub cross_process: bool,
    /// The span names a parent that is not in the dataset (or that closes a parent cycle), so it
    /// is shown as an extra root.
    pub orphan: bool,
}

/// The spans of `trace` as a tree in depth-first order: roots (including orphans) and each span's
/// children ordered by start time. Every span of the trace appears exactly once (a copy of a
/// span, [`Span::is_copy_of`](crate::Span::is_copy_of), not at all); an empty result means the
/// trace is not in the dataset. The tree is the trace's [`RequestTree`](crate::RequestTree)
/// ([`request_tree`]), so parent cycles and shared ids are resolved as in every causality view.
pub fn trace_tree(data: &Dataset, trace: TraceId) -> Vec<TreeLine> {
    let members: Vec<usize> = (0..data.spans.len()).filter(|&i| data.spans[i].trace_id == trace).collect();
    let tree = request_tree(data, trace, &members, &CausalityOptions::default());
    tree.spans
        .iter()
        .map(|s| TreeLine {
            depth: s.depth,
            span: s.span,
            cross_process: s.link == ParentLink::CrossProcess,
            orphan: s.parent.is_none() && data.spans[s.span].parent_span_id.is_some(),
        })
        .collect()
}

/// Prints `lines` one span per line, indented by depth (past 64 levels, by 64 and the depth
/// written out):
/// `daemon@node method  duration  [request.id=…]`, with `⇢` before a span whose parent ran in
/// another process, and notes for errors, missing parents and parent cycles.
pub fn render_tree(data: &Dataset, lines: &[TreeLine], out: &mut dyn Write) -> io::Result<()> {
    let shown: HashSet<_> = lines.iter().filter_map(|l| data.spans.get(l.span)).map(|s| s.span_id).collect();
    for line in lines {
        let Some(span) = data.spans.get(line.span) else { continue };
        let marker = if line.cross_process { "⇢ " } else { "" };
        write!(
            out,
            "{}{marker}{}@{} {}  {}",
            Indent(line.depth),
            span.daemon,
            span.node,
            span.method(),
            duration(span.duration_ns()),
        )?;
        if let Some(request) = &span.request_id {
            write!(out, "  [request.id={request}]")?;
        }
        if let crate::model::Status::Error { message } = &span.status {
            if message.is_empty() {
                write!(out, "  ERROR")?;
            } else {
                write!(out, "  ERROR: {message}")?;
            }
        }
        if line.orphan {
            match span.parent_span_id {
                Some(parent) if shown.contains(&parent) => write!(out, "  (in a parent cycle)")?,
                Some(parent) => write!(out, "  (parent {parent} missing)")?,
                None => {}
            }
        }
        writeln!(out)?;
    }
    Ok(())
}
