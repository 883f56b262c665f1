//! Synthetic requests shaped like the demo cluster's word counts, for benchmarks and for
//! generating large recordings (`examples/synthetic_recording.rs`).
//!
//! Each request: `client-1/client` `request` → `rpc.call` (client) → `node-0/master`
//! `handle_wordcount` (server) → `fanout` × (`map_block` → `rpc.call` (client) → worker
//! `handle_map` (server) → `disk_read`, `count_words`), then `reduce`: 3 + 5 × fanout spans.
//! Workers `node-1` … `node-3` take the blocks in turn; `node-2`'s disk is ten times slower.

use ringtrace_analysis::{Dataset, Process, Span, SpanId, SpanKind, Status, TraceId, Value};
use ringtrace_core::hash::SplitMix64;

/// Processes: client, master, three workers.
pub const PROCESSES: [(&str, &str); 5] = [
    ("client-1", "client"),
    ("node-0", "master"),
    ("node-1", "worker"),
    ("node-2", "worker"),
    ("node-3", "worker"),
];

struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn around(&mut self, ns: u64) -> u64 {
        ns / 2 + self.next() % ns.max(1)
    }
}

struct Builder {
    spans: Vec<Span>,
    next_id: u64,
    trace: TraceId,
    request: String,
}

impl Builder {
    #[allow(clippy::too_many_arguments)]
    fn span(
        &mut self,
        process: usize,
        parent: Option<SpanId>,
        name: &str,
        kind: SpanKind,
        start: u64,
        end: u64,
        line: u32,
    ) -> SpanId {
        self.next_id += 1;
        let id = SpanId::new(self.next_id).unwrap();
        let (node, daemon) = PROCESSES[process];
        let target = format!("demo::{daemon}");
        let file = format!("src/demo/{daemon}.rs");
        self.spans.push(Span {
            trace_id: self.trace,
            span_id: id,
            parent_span_id: parent,
            name: name.to_owned(),
            target: Some(target.clone()),
            node: node.to_owned(),
            daemon: daemon.to_owned(),
            kind,
            status: Status::Unset,
            start_unix_ns: start,
            end_unix_ns: end,
            request_id: Some(self.request.clone()),
            location: Some(format!("{file}:{line}")),
            attributes: vec![
                ("target".into(), Value::Str(target)),
                ("code.filepath".into(), Value::Str(file)),
                ("code.lineno".into(), Value::Int(line.into())),
                ("request.id".into(), Value::Str(self.request.clone())),
                ("thread.id".into(), Value::Int(7)),
            ],
            events: vec![],
            links: vec![],
            process,
        });
        id
    }
}

/// `traces` requests of 3 + 5 × `fanout` spans each, one every 2 ms from a fixed start.
pub fn dataset(traces: usize, fanout: usize, seed: u64) -> Dataset {
    requests(0..traces, fanout, seed)
}

/// Requests `traces` (numbered from 0) of the sequence [`dataset`] starts, for generating one
/// larger than memory a piece at a time: a piece that starts at 0 is [`dataset`]'s; the others
/// draw their times from a generator seeded by their first request.
pub fn requests(traces: std::ops::Range<usize>, fanout: usize, seed: u64) -> Dataset {
    let mut rng = Rng(SplitMix64::new(seed.wrapping_add(traces.start as u64)));
    let mut b = Builder {
        spans: Vec::with_capacity(traces.len() * (3 + 5 * fanout)),
        next_id: (traces.start * (3 + 5 * fanout)) as u64,
        trace: TraceId::new(1).unwrap(),
        request: String::new(),
    };
    for t in traces {
        b.trace = TraceId::new(((t as u128 + 1) << 64) | u128::from(rng.next())).unwrap();
        b.request = format!("req-{t:07}");
        let t0 = 1_700_000_000_000_000_000 + t as u64 * 2_000_000;
        // Master side first, to know when it ends.
        let master_start = t0 + rng.around(60_000);
        let mut at = master_start + rng.around(20_000);
        let mut blocks = Vec::with_capacity(fanout);
        for k in 0..fanout {
            let worker = 2 + (t + k) % 3;
            let disk = rng.around(if worker == 3 { 2_000_000 } else { 200_000 });
            let count = rng.around(300_000);
            let map_start = at;
            at += rng.around(10_000);
            blocks.push((worker, map_start, disk, count));
        }
        let mut master_end = at;
        let mut plans = Vec::with_capacity(fanout);
        for &(worker, map_start, disk, count) in &blocks {
            let call_start = map_start + rng.around(5_000);
            let handle_start = call_start + rng.around(40_000);
            let disk_start = handle_start + rng.around(5_000);
            let count_start = disk_start + disk + rng.around(2_000);
            let handle_end = count_start + count + rng.around(5_000);
            let call_end = handle_end + rng.around(40_000);
            let map_end = call_end + rng.around(5_000);
            master_end = master_end.max(map_end);
            plans.push(MapPlan {
                worker,
                map_start,
                call_start,
                handle_start,
                disk_start,
                count_start,
                handle_end,
                call_end,
                map_end,
                disk,
                count,
            });
        }
        let reduce_start = master_end + rng.around(5_000);
        let master_end = reduce_start + rng.around(100_000) + rng.around(5_000);
        let call_end = master_end + rng.around(60_000);
        let end = call_end + rng.around(10_000);

        let root = b.span(0, None, "request", SpanKind::Internal, t0, end, 64);
        let call = b.span(0, Some(root), "rpc.call", SpanKind::Client, t0 + 5_000, call_end, 63);
        let handle =
            b.span(1, Some(call), "handle_wordcount", SpanKind::Server, master_start, master_end, 127);
        for MapPlan {
            worker,
            map_start,
            call_start,
            handle_start,
            disk_start,
            count_start,
            handle_end,
            call_end,
            map_end,
            disk,
            count,
        } in plans
        {
            let map = b.span(1, Some(handle), "map_block", SpanKind::Internal, map_start, map_end, 146);
            let rpc = b.span(1, Some(map), "rpc.call", SpanKind::Client, call_start, call_end, 63);
            let h = b.span(worker, Some(rpc), "handle_map", SpanKind::Server, handle_start, handle_end, 81);
            b.span(worker, Some(h), "disk_read", SpanKind::Internal, disk_start, disk_start + disk, 121);
            b.span(worker, Some(h), "count_words", SpanKind::Internal, count_start, count_start + count, 151);
        }
        b.span(1, Some(handle), "reduce", SpanKind::Internal, reduce_start, master_end - 1_000, 199);
    }
    let processes = PROCESSES
        .iter()
        .map(|(node, daemon)| Process {
            node: (*node).into(),
            daemon: (*daemon).into(),
            ..Default::default()
        })
        .collect();
    Dataset { processes, spans: b.spans }
}

/// The times of one map block's spans (ns since the epoch) and its worker, planned before the
/// master's end is known.
struct MapPlan {
    worker: usize,
    map_start: u64,
    call_start: u64,
    handle_start: u64,
    disk_start: u64,
    count_start: u64,
    handle_end: u64,
    call_end: u64,
    map_end: u64,
    disk: u64,
    count: u64,
}

/// One request of about `spans` spans: a word count with a very large fan-out.
pub fn one_trace(spans: usize) -> Dataset {
    dataset(1, spans.saturating_sub(3) / 5, 42)
}

/// `s` with the attributes a recording gives a span (`target`, `code.*`, `request.id`,
/// `thread.*`), as the large synthetic recordings and stores carry them.
pub fn with_recorded_attributes(mut s: Span) -> Span {
    let (file, line) = s.location.as_deref().and_then(|l| l.rsplit_once(':')).unwrap_or(("", "0"));
    s.attributes = vec![
        ("target".to_owned(), Value::Str(s.target.clone().unwrap_or_default())),
        ("code.filepath".to_owned(), Value::Str(file.to_owned())),
        ("code.lineno".to_owned(), Value::Int(line.parse().unwrap_or(0))),
        ("request.id".to_owned(), Value::Str(s.request_id.clone().unwrap_or_default())),
        ("thread.id".to_owned(), Value::Int(7)),
        ("thread.name".to_owned(), Value::Str("tokio-runtime-worker".to_owned())),
    ];
    s
}
