//! Span trees: ordering, orphans, cycles, process crossings, and the rendered text.

use crate::common::model_span;
use ringtrace_analysis::{render_tree, trace_tree, Dataset, Status, TraceId, TreeLine};

const MS: u64 = 1_000_000;

fn dataset() -> Dataset {
    let master = |id, parent, name, start, dur| {
        model_span(id, parent, "node-1", "master", Some("demo::master"), name, start, dur, 0)
    };
    let worker = |id, parent, name, start, dur| {
        model_span(id, parent, "node-2", "worker", Some("demo::worker"), name, start, dur, 1)
    };
    let mut root = master(1, None, "handle", 0, 12_300_000);
    root.request_id = Some("req-0003".into());
    let mut store = worker(2, Some(1), "store", 5 * MS, 2 * MS);
    store.request_id = Some("req-0003".into());
    store.status = Status::Error { message: "disk full".into() };
    let mut other_trace = master(1, None, "elsewhere", 0, MS);
    other_trace.trace_id = TraceId::new(0xdef).unwrap();
    Dataset {
        processes: vec![],
        spans: vec![
            store,
            other_trace,
            worker(4, Some(2), "fsync", 5_500_000, 850),
            master(3, Some(1), "prepare", MS, MS),
            root,
            master(5, Some(99), "late", MS / 2, 40_000),
            worker(6, Some(7), "ping", 20 * MS, MS),
            worker(7, Some(6), "pong", 21 * MS, MS),
        ],
    }
}

fn line(depth: usize, span: usize, cross_process: bool, orphan: bool) -> TreeLine {
    TreeLine { depth, span, cross_process, orphan }
}

#[test]
fn tree_orders_children_by_start_and_keeps_orphans_and_cycles() {
    let data = dataset();
    let lines = trace_tree(&data, TraceId::new(0xabc).unwrap());
    assert_eq!(
        lines,
        [
            line(0, 4, false, false), // handle
            line(1, 3, false, false), // prepare (starts first)
            line(1, 0, true, false),  // store, in the worker process
            line(2, 2, false, false), // fsync
            line(0, 5, false, true),  // late: parent 99 is missing
            line(0, 6, false, true),  // ping/pong form a cycle: broken at the earliest
            line(1, 7, false, false),
        ]
    );
    assert!(trace_tree(&data, TraceId::new(0x123).unwrap()).is_empty());
    assert_eq!(trace_tree(&data, TraceId::new(0xdef).unwrap()), [line(0, 1, false, false)]);
}

#[test]
fn rendered_tree() {
    let data = dataset();
    let lines = trace_tree(&data, TraceId::new(0xabc).unwrap());
    let mut out = Vec::new();
    render_tree(&data, &lines, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "master@node-1 demo::master::handle  12.3 ms  [request.id=req-0003]\n\
         \x20 master@node-1 demo::master::prepare  1.0 ms\n\
         \x20 ⇢ worker@node-2 demo::worker::store  2.0 ms  [request.id=req-0003]  ERROR: disk full\n\
         \x20   worker@node-2 demo::worker::fsync  850 ns\n\
         master@node-1 demo::master::late  40.0 µs  (parent 0000000000000063 missing)\n\
         worker@node-2 demo::worker::ping  1.0 ms  (in a parent cycle)\n\
         \x20 worker@node-2 demo::worker::pong  1.0 ms\n"
    );
}
