//! Which request each I/O call served: the linking rules of the I/O-bottleneck method
//! (`../shared/MISSION.md`), on calls recorded anywhere — by `ringtrace::io` inside spans, or
//! imported from `strace` logs of programs nobody instrumented.
//!
//! 1. **Send and receive.** The two ends of a connection are found by their addresses: a socket
//!    whose local and peer addresses are another socket's peer and local ones, on whatever host
//!    (the k-th opened with them on one side is the k-th on the other; when only some were
//!    recorded, those whose lifetimes overlap). What one end sends, the other receives: the
//!    calls are matched by the turns each end took (rule 3), or, when one end's record misses a
//!    whole turn, by their place in each direction's byte stream (which, unlike clocks, two hosts
//!    agree on).
//!    A call that failed (or moved nothing) on a socket belongs with the next call on the same
//!    socket, on any thread of the process — a retry continues the request.
//! 2. **Work between network calls.** An I/O call that is not on a socket (a file read, an
//!    `fsync`) and was made outside any span belongs to the request of the last network call its
//!    thread made before it.
//! 3. **A request and its reply.** On a connection, a request is the bytes one side sends until
//!    it starts receiving, and the reply it receives until it sends again: the side that spoke
//!    first sets the turns, and consecutive sends are one request. A connection kept open serves
//!    several requests in turn.
//! 4. **Spans.** A call made inside a span of an instrumented process (`ringtrace::io`) belongs to
//!    that span's trace: calls of one trace are one request, named by the trace, and the calls
//!    an uninstrumented server made for it join it through rules 1–3.
//!
//! Everything here is deterministic and `O(n log n)` in the number of calls.

use std::collections::{BTreeMap, HashMap};

use ringtrace_core::TraceId;

use super::{Endpoint, IoCall, IoOp, Transport};

/// One request and the I/O calls it made, wherever they ran.
#[derive(Clone, Debug, PartialEq)]
pub struct IoRequest {
    /// The request's name: its trace id (hex) when a call of it was made inside a span, else
    /// `io-N` (N counting requests by their first call).
    pub id: String,
    /// The trace, when a call of it was made inside a span.
    pub trace_id: Option<TraceId>,
    /// Indices into the calls, by start time.
    pub calls: Vec<usize>,
    /// A call of the side that opened the request's first connection (the client), when known:
    /// its node, daemon and process name the client.
    pub client: Option<usize>,
}

/// The requests the calls served.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IoLinks {
    /// Requests, by their first call's start.
    pub requests: Vec<IoRequest>,
    /// For each call, the index of its request; `None` for calls linked to none (file I/O
    /// before a thread's first network call, say).
    pub request_of: Vec<Option<usize>>,
    /// For each call, its exchange: one request's part on one connection (numbered across
    /// connections), the exchange of the network call before it on its thread for a call off
    /// the network (rule 2); `None` for neither. The calls of both ends of an exchange talked
    /// to each other.
    pub exchange_of: Vec<Option<usize>>,
    /// Connections found (pairs of socket ends, or one end when only one was recorded).
    pub connections: usize,
    /// Connections of which both ends were recorded.
    pub connections_both_ends: usize,
}

/// A disjoint-set forest with path halving and union by size.
struct UnionFind {
    parent: Vec<usize>,
    size: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> Self {
        Self { parent: (0..n).collect(), size: vec![1; n] }
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a == b {
            return;
        }
        let (big, small) = if self.size[a] >= self.size[b] { (a, b) } else { (b, a) };
        self.parent[small] = big;
        self.size[big] += self.size[small];
    }
}

/// Which way a data call moves bytes, seen from its own end of the connection.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dir {
    Out,
    In,
}

fn direction(op: IoOp) -> Option<Dir> {
    match op {
        IoOp::Send | IoOp::Write | IoOp::Pwrite => Some(Dir::Out),
        IoOp::Recv | IoOp::Read | IoOp::Pread => Some(Dir::In),
        _ => None,
    }
}

/// One end of a connection: the calls made on one socket on one host, from its opening to its
/// close — by any process holding it (a server that forks after `accept`) and through any
/// descriptor (`dup`, `try_clone`).
struct End {
    calls: Vec<usize>,
    local: Endpoint,
    remote: Endpoint,
    transport: Option<Transport>,
    first: u64,
    last: u64,
}

/// Identifies a socket while it is open: its host and both addresses.
type SocketKey<'a> = (&'a str, &'a Endpoint, &'a Endpoint);

/// The ends of every connection, calls of each sorted by start.
fn ends(calls: &[IoCall]) -> Vec<End> {
    let mut sockets: HashMap<SocketKey<'_>, Vec<usize>> = HashMap::new();
    for (i, c) in calls.iter().enumerate() {
        let r = &c.record;
        if let (Some(local), Some(remote)) = (&r.local, &r.remote) {
            sockets.entry((c.node.as_str(), local, remote)).or_default().push(i);
        }
    }
    let mut ends = Vec::new();
    let mut keys: Vec<_> = sockets.into_iter().collect();
    keys.sort_by_key(|(_, v)| v[0]);
    for ((_, local, remote), mut indices) in keys {
        indices.sort_by_key(|&i| (calls[i].record.start_unix_ns, calls[i].record.end_unix_ns, i));
        let mut current: Vec<usize> = Vec::new();
        let flush = |current: &mut Vec<usize>, ends: &mut Vec<End>| {
            if current.is_empty() {
                return;
            }
            let taken = std::mem::take(current);
            let first = calls[taken[0]].record.start_unix_ns;
            let last = taken.iter().map(|&i| calls[i].record.end_unix_ns).max().unwrap_or(first);
            let transport = taken.iter().find_map(|&i| calls[i].record.transport);
            ends.push(End {
                calls: taken,
                local: local.clone(),
                remote: remote.clone(),
                transport,
                first,
                last,
            });
        };
        // The same addresses connected or accepted again after a close: a new connection (a
        // port reused). A close alone does not end it: a forked process may hold it still.
        let mut closed = false;
        for i in indices {
            let op = calls[i].record.op;
            if closed && matches!(op, Some(IoOp::Connect | IoOp::Accept)) {
                flush(&mut current, &mut ends);
                closed = false;
            }
            closed |= op == Some(IoOp::Close);
            current.push(i);
        }
        flush(&mut current, &mut ends);
    }
    ends
}

/// Pairs the ends of each connection: `(a, b)` indices into `ends`, `b` absent when the other
/// end was not recorded.
fn connections(ends: &[End]) -> Vec<(usize, Option<usize>)> {
    // By the unordered address pair: the ends whose local address is the smaller one, and the
    // others.
    type Pair<'a> = (Option<Transport>, &'a Endpoint, &'a Endpoint);
    let mut by_pair: BTreeMap<Pair<'_>, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for (i, e) in ends.iter().enumerate() {
        let (lo, hi, low_side) =
            if e.local <= e.remote { (&e.local, &e.remote, true) } else { (&e.remote, &e.local, false) };
        let entry = by_pair.entry((e.transport, lo, hi)).or_default();
        if low_side {
            entry.0.push(i);
        } else {
            entry.1.push(i);
        }
    }
    let mut out = Vec::new();
    for (_, (mut low, mut high)) in by_pair {
        low.sort_by_key(|&i| ends[i].first);
        high.sort_by_key(|&i| ends[i].first);
        if low.len() == high.len() {
            // As many ends on each side: the k-th opened on one is the k-th on the other, however
            // far apart the two hosts' clocks are.
            out.extend(low.into_iter().zip(high.into_iter().map(Some)));
            continue;
        }
        // A port reused while only some of its connections were recorded: pair by overlapping
        // lifetimes, walking both lists (sorted by opening) once.
        let mut taken = vec![false; high.len()];
        let mut k = 0;
        for a in low {
            // Ends of the other side that closed before this one opened match no later one.
            while k < high.len() && ends[high[k]].last < ends[a].first {
                k += 1;
            }
            let found = (k < high.len() && ends[high[k]].first <= ends[a].last).then_some(k);
            match found {
                Some(j) => {
                    taken[j] = true;
                    k += 1;
                    out.push((a, Some(high[j])));
                }
                None => out.push((a, None)),
            }
        }
        out.extend(high.iter().zip(taken).filter(|(_, t)| !t).map(|(&b, _)| (b, None)));
    }
    out
}

/// Whether a call moved data on its socket (so that it has a place in a byte stream).
fn data_dir(calls: &[IoCall], i: usize) -> Option<Dir> {
    let r = &calls[i].record;
    if !r.ok() || r.bytes == 0 {
        return None;
    }
    direction(r.op?)
}

/// Splits one connection into requests (rule 3) and returns, for each call of either end, its
/// request's number within the connection, and which end is the client's (`Some(true)`: `a`):
/// the end that connected, else the one that did not accept, else the one that spoke first.
fn segments(calls: &[IoCall], a: &End, b: Option<&End>) -> (Vec<(usize, usize)>, Option<bool>) {
    // The end that spoke first leads: on one host, so its own order of calls is exact. With both
    // ends, the one that connected or sent first.
    let connects = |e: &End| e.calls.iter().any(|&i| calls[i].record.op == Some(IoOp::Connect));
    let first_dir = |e: &End| e.calls.iter().find_map(|&i| data_dir(calls, i));
    let a_leads = match b {
        None => true,
        Some(b) => match (connects(a), connects(b)) {
            (true, false) => true,
            (false, true) => false,
            _ => match (first_dir(a), first_dir(b)) {
                (Some(Dir::Out), Some(Dir::In)) | (Some(_), None) => true,
                (Some(Dir::In), Some(Dir::Out)) | (None, Some(_)) => false,
                _ => a.first <= b.first,
            },
        },
    };
    let (lead, other) = match (a_leads, b) {
        (true, _) | (false, None) => (a, b),
        (false, Some(b)) => (b, Some(a)),
    };
    let accepts = |e: &End| e.calls.iter().any(|&i| calls[i].record.op == Some(IoOp::Accept));
    // The lead's requests go out when it connected (even if the server speaks first: a greeting),
    // come in when it accepted, else go the way it first spoke.
    let lead_is_client = if connects(lead) {
        Some(true)
    } else if accepts(lead) {
        Some(false)
    } else {
        first_dir(lead).map(|d| d == Dir::Out)
    };
    let opener = lead_is_client.map(|client| if client { Dir::Out } else { Dir::In });
    // On the leading end: a request starts where a call in the opening direction follows one in
    // the other direction, once the current request has had one (a server's greeting before the
    // first query joins it). Boundaries as offsets into the lead's outgoing and incoming streams.
    let (mut out_start, mut in_start) = (Vec::new(), Vec::new());
    let (mut out_off, mut in_off) = (0u64, 0u64);
    let mut prev: Option<Dir> = None;
    let mut opened = false;
    let mut assigned: Vec<(usize, Option<usize>)> = Vec::new();
    for &i in &lead.calls {
        let seg = match data_dir(calls, i) {
            Some(dir) => {
                let turn = Some(dir) == opener && prev.is_some_and(|p| p != dir) && opened;
                if out_start.is_empty() || turn {
                    out_start.push(out_off);
                    in_start.push(in_off);
                    opened = false;
                }
                opened |= Some(dir) == opener;
                prev = Some(dir);
                match dir {
                    Dir::Out => out_off += calls[i].record.bytes,
                    Dir::In => in_off += calls[i].record.bytes,
                }
                Some(out_start.len() - 1)
            }
            None => None,
        };
        assigned.push((i, seg));
    }
    let upper = |starts: &[u64], off: u64| starts.partition_point(|&s| s <= off).saturating_sub(1);
    if let Some(other) = other {
        // The other end's turns, the same way round: when it took as many as the lead, its k-th
        // is the lead's k-th (whatever bytes either end did not record). Otherwise its bytes are
        // placed by their offsets in the same streams: what it sends is what the lead receives.
        let mut turns: Vec<Option<usize>> = Vec::with_capacity(other.calls.len());
        let (mut count, mut prev, mut opened) = (0usize, None, false);
        let other_opener = opener.map(|d| if d == Dir::Out { Dir::In } else { Dir::Out });
        for &i in &other.calls {
            turns.push(data_dir(calls, i).map(|dir| {
                let turn = Some(dir) == other_opener && prev.is_some_and(|p| p != dir) && opened;
                if count == 0 || turn {
                    count += 1;
                    opened = false;
                }
                opened |= Some(dir) == other_opener;
                prev = Some(dir);
                count - 1
            }));
        }
        if count == out_start.len() {
            assigned.extend(other.calls.iter().copied().zip(turns));
        } else {
            let (mut o_out, mut o_in) = (0u64, 0u64);
            for &i in &other.calls {
                let seg = data_dir(calls, i).map(|dir| {
                    let (starts, off) = match dir {
                        Dir::Out => (&in_start, &mut o_out),
                        Dir::In => (&out_start, &mut o_in),
                    };
                    let s = if starts.is_empty() { 0 } else { upper(starts, *off) };
                    *off += calls[i].record.bytes;
                    s
                });
                assigned.push((i, seg));
            }
        }
    }
    // Calls that moved nothing (connect, accept, close, failures, end of stream) go with the next
    // call on the same end that did (a retry continues the request), else the last one before.
    let mut out = Vec::with_capacity(assigned.len());
    let lead_len = lead.calls.len();
    for part in [&assigned[..lead_len], &assigned[lead_len..]] {
        let mut next: Option<usize> = None;
        let mut resolved = vec![0usize; part.len()];
        for (k, &(_, seg)) in part.iter().enumerate().rev() {
            if seg.is_some() {
                next = seg;
            }
            resolved[k] = seg.or(next).unwrap_or(usize::MAX);
        }
        let mut prev_seg = 0;
        for (k, &(i, _)) in part.iter().enumerate() {
            if resolved[k] == usize::MAX {
                resolved[k] = prev_seg;
            }
            prev_seg = resolved[k];
            out.push((i, resolved[k]));
        }
    }
    let a_is_client = lead_is_client.map(|c| c == std::ptr::eq(lead, a));
    (out, a_is_client)
}

/// Links every call to the request it served; see the module docs for the rules.
pub fn link_requests(calls: &[IoCall]) -> IoLinks {
    let ends = ends(calls);
    let pairs = connections(&ends);
    // Union-find over the calls, then one node per (connection, request within it).
    let mut nodes = calls.len();
    let mut links: Vec<(usize, usize)> = Vec::new();
    let mut client_call: HashMap<usize, usize> = HashMap::new();
    let mut both = 0;
    for &(a, b) in &pairs {
        both += usize::from(b.is_some());
        let (assigned, a_is_client) = segments(calls, &ends[a], b.map(|b| &ends[b]));
        let base = nodes;
        let count = assigned.iter().map(|&(_, s)| s + 1).max().unwrap_or(0);
        nodes += count;
        for (i, seg) in assigned {
            links.push((i, base + seg));
        }
        let client_end = match a_is_client {
            Some(true) => Some(&ends[a]),
            Some(false) => b.map(|b| &ends[b]),
            None => None,
        };
        if let Some(end) = client_end {
            for s in 0..count {
                client_call.insert(base + s, end.calls[0]);
            }
        }
    }
    let mut uf = UnionFind::new(nodes);
    let mut exchange_of = vec![None; calls.len()];
    for &(i, node) in &links {
        uf.union(i, node);
        exchange_of[i] = Some(node - calls.len());
    }
    // Rule 2: per thread, a call off the network goes with the thread's last network call.
    let mut threads: HashMap<(&str, u32, u64), Vec<usize>> = HashMap::new();
    for (i, c) in calls.iter().enumerate() {
        threads.entry((c.node.as_str(), c.record.pid, c.record.tid)).or_default().push(i);
    }
    for indices in threads.values_mut() {
        indices.sort_by_key(|&i| (calls[i].record.start_unix_ns, i));
        let mut last_network: Option<usize> = None;
        for &i in indices.iter() {
            if calls[i].record.is_network() {
                last_network = Some(i);
            } else if calls[i].in_span {
                // Made inside a span: its trace names its request (rule 4), whatever the thread
                // did before.
            } else if let Some(n) = last_network {
                uf.union(i, n);
                exchange_of[i] = exchange_of[n];
            }
        }
    }
    // Rule 4: the calls made inside spans of one trace are one request.
    let mut by_trace: HashMap<TraceId, usize> = HashMap::new();
    for (i, c) in calls.iter().enumerate().filter(|(_, c)| c.in_span) {
        match by_trace.get(&c.trace_id) {
            Some(&first) => uf.union(first, i),
            None => {
                by_trace.insert(c.trace_id, i);
            }
        }
    }
    // Components that moved data over the network, or hold a call made inside a span, are
    // requests; the rest (a lone connect that failed, a socket closed unused) served none.
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..calls.len() {
        let root = uf.find(i);
        members.entry(root).or_default().push(i);
    }
    // A request's client: the client end of its earliest exchange (the request's origin, when
    // it went on through other servers).
    let mut clients: HashMap<usize, usize> = HashMap::new();
    for (&node, &call) in &client_call {
        let start = |c: usize| (calls[c].record.start_unix_ns, c);
        clients
            .entry(uf.find(node))
            .and_modify(|c| *c = if start(call) < start(*c) { call } else { *c })
            .or_insert(call);
    }
    let mut requests: Vec<IoRequest> = members
        .into_iter()
        .filter(|(_, m)| {
            m.iter().any(|&i| (calls[i].record.is_network() && calls[i].record.bytes > 0) || calls[i].in_span)
        })
        .map(|(root, mut m)| {
            m.sort_by_key(|&i| (calls[i].record.start_unix_ns, i));
            let mut traces: BTreeMap<TraceId, usize> = BTreeMap::new();
            for &i in m.iter().filter(|&&i| calls[i].in_span) {
                *traces.entry(calls[i].trace_id).or_default() += 1;
            }
            let trace_id = traces.into_iter().max_by_key(|&(t, n)| (n, std::cmp::Reverse(t))).map(|(t, _)| t);
            let client = clients.get(&root).copied();
            IoRequest { id: String::new(), trace_id, calls: m, client }
        })
        .collect();
    requests.sort_by_key(|r| (calls[r.calls[0]].record.start_unix_ns, r.calls[0]));
    let mut request_of = vec![None; calls.len()];
    for (n, r) in requests.iter_mut().enumerate() {
        r.id = match r.trace_id {
            Some(t) => t.to_string(),
            None => format!("io-{}", n + 1),
        };
        for &i in &r.calls {
            request_of[i] = Some(n);
        }
    }
    IoLinks { requests, request_of, exchange_of, connections: pairs.len(), connections_both_ends: both }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::IoRecord;

    fn ep(port: u16) -> Endpoint {
        Endpoint { address: "10.0.0.1".into(), port }
    }

    struct Log {
        calls: Vec<IoCall>,
    }

    impl Log {
        fn new() -> Self {
            Self { calls: Vec::new() }
        }

        /// A call on `node`, thread `tid`, at `t` for 10 ns.
        #[allow(clippy::too_many_arguments)]
        fn call(
            &mut self,
            node: &str,
            tid: u64,
            t: u64,
            op: IoOp,
            fd: i64,
            socket: Option<(u16, u16)>,
            bytes: u64,
            error: Option<&str>,
        ) -> usize {
            let record = IoRecord {
                pid: 1,
                tid,
                op: Some(op),
                syscall: op.as_str().into(),
                fd: Some(fd),
                start_unix_ns: t,
                end_unix_ns: t + 10,
                error: error.map(str::to_owned),
                bytes,
                transport: socket.map(|_| Transport::Tcp),
                local: socket.map(|(l, _)| ep(l)),
                remote: socket.map(|(_, r)| ep(r)),
                ..IoRecord::default()
            };
            self.calls.push(IoCall {
                span: self.calls.len(),
                process: 0,
                node: node.into(),
                daemon: node.into(),
                trace_id: TraceId::new(1).unwrap(),
                in_span: false,
                record,
            });
            self.calls.len() - 1
        }
    }

    /// Two requests on one kept-alive connection, the server's clock 1 s ahead, a failed send
    /// retried, a file read between the server's receive and reply.
    #[test]
    fn requests_on_one_connection_with_retries_and_file_io() {
        let mut log = Log::new();
        let (c, s) = (Some((5000, 80)), Some((80, 5000)));
        let skew = 1_000_000_000;
        let c_connect = log.call("client", 1, 100, IoOp::Connect, 3, c, 0, None);
        let s_accept = log.call("server", 7, 105 + skew, IoOp::Accept, 4, s, 0, None);
        let c_fail = log.call("client", 1, 110, IoOp::Send, 3, c, 0, Some("EAGAIN"));
        let c_send1 = log.call("client", 2, 120, IoOp::Send, 3, c, 50, None);
        let s_recv1a = log.call("server", 7, 125 + skew, IoOp::Recv, 4, s, 30, None);
        let s_recv1b = log.call("server", 7, 130 + skew, IoOp::Recv, 4, s, 20, None);
        let s_file = log.call("server", 7, 135 + skew, IoOp::Read, 9, None, 4096, None);
        let s_send1 = log.call("server", 7, 140 + skew, IoOp::Send, 4, s, 100, None);
        let c_recv1 = log.call("client", 1, 150, IoOp::Recv, 3, c, 100, None);
        let c_send2 = log.call("client", 1, 160, IoOp::Send, 3, c, 10, None);
        let s_recv2 = log.call("server", 7, 165 + skew, IoOp::Recv, 4, s, 10, None);
        let s_send2 = log.call("server", 7, 170 + skew, IoOp::Send, 4, s, 5, None);
        let c_recv2 = log.call("client", 1, 180, IoOp::Recv, 3, c, 5, None);
        let c_eof = log.call("client", 1, 190, IoOp::Recv, 3, c, 0, None);
        let c_close = log.call("client", 1, 200, IoOp::Close, 3, c, 0, None);
        let before = log.call("server", 8, 1, IoOp::Open, 9, None, 0, None);
        let links = link_requests(&log.calls);
        assert_eq!(links.connections, 1);
        assert_eq!(links.connections_both_ends, 1);
        assert_eq!(links.requests.len(), 2, "{links:#?}");
        let first = &links.requests[links.request_of[c_send1].unwrap()];
        let mut expected =
            vec![c_connect, s_accept, c_fail, c_send1, s_recv1a, s_recv1b, s_file, s_send1, c_recv1];
        let mut got = first.calls.clone();
        expected.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, expected);
        let second = links.request_of[c_send2].unwrap();
        for i in [s_recv2, s_send2, c_recv2, c_eof, c_close] {
            assert_eq!(links.request_of[i], Some(second), "call {i}");
        }
        assert_eq!(links.request_of[before], None);
        assert_eq!(log.calls[first.client.unwrap()].node, "client");
        assert_eq!(links.requests[0].id, "io-1");
    }

    /// A server that speaks first (a greeting, as MySQL's or SMTP's): each query goes with its
    /// reply, the greeting with the first query, and the connecting end is the client.
    #[test]
    fn a_greeting_joins_the_first_query() {
        let mut log = Log::new();
        let (c, s) = (Some((5000, 3306)), Some((3306, 5000)));
        log.call("client", 1, 10, IoOp::Connect, 3, c, 0, None);
        log.call("server", 2, 11, IoOp::Accept, 4, s, 0, None);
        let hello = log.call("server", 2, 12, IoOp::Send, 4, s, 50, None);
        let hello_in = log.call("client", 1, 13, IoOp::Recv, 3, c, 50, None);
        let q1 = log.call("client", 1, 14, IoOp::Send, 3, c, 10, None);
        let r1 = log.call("server", 2, 16, IoOp::Send, 4, s, 20, None);
        let r1_in = log.call("client", 1, 17, IoOp::Recv, 3, c, 20, None);
        let q2 = log.call("client", 1, 18, IoOp::Send, 3, c, 10, None);
        let r2 = log.call("server", 2, 20, IoOp::Send, 4, s, 30, None);
        let links = link_requests(&log.calls);
        assert_eq!(links.requests.len(), 2, "{links:#?}");
        let first = links.request_of[q1];
        for i in [hello, hello_in, r1, r1_in] {
            assert_eq!(links.request_of[i], first, "call {i}");
        }
        assert_eq!(links.request_of[r2], links.request_of[q2]);
        assert_ne!(links.request_of[q2], first);
        assert_eq!(log.calls[links.requests[0].client.unwrap()].node, "client");
    }

    /// A server that forks after `accept`: the parent accepts and closes its copy, the child
    /// (another process, another descriptor) serves. One end, one request.
    #[test]
    fn a_forked_servers_ends_are_one() {
        let mut log = Log::new();
        let (c, s) = (Some((5000, 80)), Some((80, 5000)));
        let send = log.call("client", 1, 10, IoOp::Send, 3, c, 10, None);
        log.call("server", 7, 5, IoOp::Accept, 4, s, 0, None);
        log.call("server", 7, 12, IoOp::Close, 4, s, 0, None);
        let recv = log.call("server", 8, 13, IoOp::Recv, 5, s, 10, None);
        let reply = log.call("server", 8, 14, IoOp::Send, 5, s, 10, None);
        for i in [recv, reply] {
            log.calls[i].record.pid = 8;
        }
        let links = link_requests(&log.calls);
        assert_eq!(links.connections, 1, "{links:#?}");
        assert_eq!(links.requests.len(), 1);
        assert!(links.request_of.iter().all(|r| *r == links.request_of[send]));
    }

    /// The server did not record part of each request (its header, read before any span):
    /// the byte offsets no longer line up, the turns still do.
    #[test]
    fn unrecorded_bytes_on_one_end_do_not_shift_the_requests() {
        let mut log = Log::new();
        let (c, s) = (Some((5000, 80)), Some((80, 5000)));
        let mut pairs = Vec::new();
        for k in 0..4u64 {
            let t = 100 * k;
            let send = log.call("client", 1, t + 10, IoOp::Send, 3, c, 40, None);
            // The server records 30 of the 40 bytes.
            let recv = log.call("server", 2, t + 20, IoOp::Recv, 4, s, 30, None);
            let reply = log.call("server", 2, t + 30, IoOp::Send, 4, s, 10, None);
            let got = log.call("client", 1, t + 40, IoOp::Recv, 3, c, 10, None);
            pairs.push([send, recv, reply, got]);
        }
        let links = link_requests(&log.calls);
        assert_eq!(links.requests.len(), 4, "{links:#?}");
        for p in pairs {
            assert!(p.iter().all(|&i| links.request_of[i] == links.request_of[p[0]]), "{p:?}");
        }
    }

    /// Only the server was traced: its turns still split the requests.
    #[test]
    fn one_end_alone_is_split_by_its_own_turns() {
        let mut log = Log::new();
        let s = Some((80, 5000));
        let r1 = log.call("server", 1, 10, IoOp::Recv, 4, s, 10, None);
        let r1b = log.call("server", 1, 11, IoOp::Recv, 4, s, 10, None);
        let w1 = log.call("server", 1, 12, IoOp::Send, 4, s, 10, None);
        let r2 = log.call("server", 1, 13, IoOp::Recv, 4, s, 10, None);
        let w2 = log.call("server", 1, 14, IoOp::Send, 4, s, 10, None);
        let links = link_requests(&log.calls);
        assert_eq!(links.requests.len(), 2);
        assert_eq!(links.request_of[r1], links.request_of[r1b]);
        assert_eq!(links.request_of[r1], links.request_of[w1]);
        assert_eq!(links.request_of[r2], links.request_of[w2]);
        assert_ne!(links.request_of[r1], links.request_of[r2]);
        assert_eq!(links.requests[0].client, None, "the server's end is no client");
    }

    /// Calls inside spans of one trace are one request, across connections, and name it.
    #[test]
    fn spans_name_requests() {
        let mut log = Log::new();
        let a = log.call("client", 1, 10, IoOp::Send, 3, Some((5000, 80)), 10, None);
        let b = log.call("client", 1, 20, IoOp::Send, 4, Some((5001, 81)), 10, None);
        let x = log.call("server", 1, 30, IoOp::Recv, 7, Some((81, 5001)), 10, None);
        for i in [a, b] {
            log.calls[i].in_span = true;
            log.calls[i].trace_id = TraceId::new(0xabc).unwrap();
        }
        let links = link_requests(&log.calls);
        assert_eq!(links.requests.len(), 1);
        assert_eq!(links.requests[0].trace_id, TraceId::new(0xabc));
        assert_eq!(links.requests[0].id, TraceId::new(0xabc).unwrap().to_string());
        assert_eq!(links.request_of[x], Some(0));
    }

    /// A port reused: connected again after a close, it is another connection.
    #[test]
    fn a_closed_and_reopened_socket_is_a_new_connection() {
        let mut log = Log::new();
        let c = Some((5000, 80));
        let s1 = log.call("c", 1, 10, IoOp::Send, 3, c, 10, None);
        log.call("c", 1, 20, IoOp::Close, 3, c, 0, None);
        log.call("c", 1, 25, IoOp::Connect, 3, c, 0, None);
        let s2 = log.call("c", 1, 30, IoOp::Send, 3, c, 10, None);
        let links = link_requests(&log.calls);
        assert_eq!(links.connections, 2);
        assert_ne!(links.request_of[s1], links.request_of[s2]);
    }
}
