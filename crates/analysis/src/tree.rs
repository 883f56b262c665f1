//! The span tree of one trace, in display order.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use ringtrace_core::TraceId;

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
/// trace is not in the dataset.
pub fn trace_tree(data: &Dataset, trace: TraceId) -> Vec<TreeLine> {
    let members: Vec<usize> = (0..data.spans.len()).filter(|&i| data.spans[i].trace_id == trace).collect();
    let copies = data.copies_among(&members);
    let members: Vec<usize> = members.into_iter().zip(copies).filter(|(_, c)| !c).map(|(i, _)| i).collect();
    let mut by_id = HashMap::with_capacity(members.len());
    for &i in &members {
        by_id.entry(data.spans[i].span_id).or_insert(i);
    }
    let parent_of =
        |i: usize| data.spans[i].parent_span_id.and_then(|p| by_id.get(&p).copied()).filter(|&p| p != i);
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for &i in &members {
        match parent_of(i) {
            Some(p) => children.entry(p).or_default().push(i),
            None => roots.push(i),
        }
    }
    let by_start = |a: &usize, b: &usize| {
        let (sa, sb) = (&data.spans[*a], &data.spans[*b]);
        sa.start_unix_ns.cmp(&sb.start_unix_ns).then(a.cmp(b))
    };
    roots.sort_by(by_start);
    children.values_mut().for_each(|c| c.sort_by(by_start));

    let mut visited = HashSet::with_capacity(members.len());
    let mut lines = Vec::with_capacity(members.len());
    let walk = |root: usize, lines: &mut Vec<TreeLine>, visited: &mut HashSet<usize>| {
        let mut stack = vec![(root, 0usize, true)];
        while let Some((i, depth, is_root)) = stack.pop() {
            if !visited.insert(i) {
                continue;
            }
            let span = &data.spans[i];
            let parent = parent_of(i);
            lines.push(TreeLine {
                depth,
                span: i,
                cross_process: !is_root && parent.is_some_and(|p| data.spans[p].process != span.process),
                orphan: is_root && span.parent_span_id.is_some(),
            });
            if let Some(kids) = children.get(&i) {
                stack.extend(kids.iter().rev().map(|&k| (k, depth + 1, false)));
            }
        }
    };
    for &root in &roots {
        walk(root, &mut lines, &mut visited);
    }
    // Spans in a parent cycle are unreachable from any root: start from the earliest of them.
    let mut rest: Vec<usize> = members.iter().copied().filter(|i| !visited.contains(i)).collect();
    rest.sort_by(by_start);
    for i in rest {
        walk(i, &mut lines, &mut visited);
    }
    lines
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
