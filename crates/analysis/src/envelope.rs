//! A file system's I/O envelope, and the I/O time it predicts for a many-task stage — the "MTC
//! envelope" model of `../shared/MISSION.md`.
//!
//! # The envelope
//! An [`Envelope`] holds measured [`EnvelopePoint`]s: for `procs` processes working at once on
//! files of `bytes` bytes, the aggregate rates of the whole group — creates per second, writes
//! (files per second and bytes per second), 1-to-1 reads of each process's own file, local and
//! remote, and N-to-1 reads of one shared file. A parameter that was not measured is absent, never
//! zero. JSON (`ringtrace envelope --json` writes it, `ringtrace predict --envelope` reads it):
//! `{"points":[{"procs","bytes","create_ops_per_s","write_ops_per_s","write_bytes_per_s",
//! "read_local_ops_per_s","read_local_bytes_per_s","read_remote_ops_per_s",
//! "read_remote_bytes_per_s","read_shared_ops_per_s","read_shared_bytes_per_s"}]}`; a single flat
//! object of those keys is read as one point, and without `procs` and `bytes` it holds at any
//! process count and file size.
//!
//! # Taking a parameter at a stage's process count and file size
//! [`Envelope::at`]: a point measured there gives its value. Between measured points the value is
//! interpolated linearly in the logarithms — of the rate, against the logarithms of the process
//! count and of the file size — across the four surrounding points (two when one coordinate was
//! measured exactly), since rates follow powers of both over the ranges measured (bandwidth
//! grows with the file size until it saturates). Outside the measured range, or where a
//! surrounding point lacks the parameter, it is an error naming what is missing: the model never
//! extrapolates silently.
//!
//! # The prediction
//! A stage runs `N` tasks on `C` nodes (one process each), in `R = ⌈N/C⌉` rounds of `C` tasks at
//! once; parameters are taken at `C` processes and the stage's file size `D` ([`predict`]):
//! - **write**: `R × (1/T_m + C·D/B_L)` when bandwidth-bound, `R × (1/T_m + C/T_L)` when
//!   throughput-bound — the larger of the two decides, and its term says which. `T_m` is the
//!   create rate one process sees with `C` at work: the envelope's aggregate `create_ops_per_s`
//!   over `C`; `T_L` and `B_L` are the aggregate write rates.
//! - **read**: `R × [max(A·C/T_1L, C·A·D/B_1L) + max((1−A)·C/T_1R, C·(1−A)·D/B_1R) +
//!   max(C/T_N, C·D_N/B_N)]`, with `A` the fraction of reads that are local, the remote term only
//!   when `A < 1`, and the last (N-to-1 reads of a shared file of `D_N` bytes, parameters at that
//!   size) only when a shared file is read.

use std::fmt;

use serde_json::{Map, Value};

/// The parameters of an envelope point, in the order of the JSON contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Param {
    /// Files created per second (aggregate over the processes): `T_m` × processes.
    CreateOps,
    /// Files written per second: `T_L`.
    WriteOps,
    /// Bytes written per second: `B_L`.
    WriteBytes,
    /// Own files read per second, local: `T_1L`.
    ReadLocalOps,
    /// Bytes read per second from own local files: `B_1L`.
    ReadLocalBytes,
    /// Own files read per second, remote: `T_1R`.
    ReadRemoteOps,
    /// Bytes read per second from own remote files: `B_1R`.
    ReadRemoteBytes,
    /// Reads of one shared file per second, all processes: `T_N`.
    ReadSharedOps,
    /// Bytes read per second from one shared file: `B_N`.
    ReadSharedBytes,
}

impl Param {
    /// Every parameter, in the JSON contract's order.
    pub const ALL: [Param; 9] = [
        Param::CreateOps,
        Param::WriteOps,
        Param::WriteBytes,
        Param::ReadLocalOps,
        Param::ReadLocalBytes,
        Param::ReadRemoteOps,
        Param::ReadRemoteBytes,
        Param::ReadSharedOps,
        Param::ReadSharedBytes,
    ];

    /// Its JSON key.
    pub fn key(self) -> &'static str {
        match self {
            Param::CreateOps => "create_ops_per_s",
            Param::WriteOps => "write_ops_per_s",
            Param::WriteBytes => "write_bytes_per_s",
            Param::ReadLocalOps => "read_local_ops_per_s",
            Param::ReadLocalBytes => "read_local_bytes_per_s",
            Param::ReadRemoteOps => "read_remote_ops_per_s",
            Param::ReadRemoteBytes => "read_remote_bytes_per_s",
            Param::ReadSharedOps => "read_shared_ops_per_s",
            Param::ReadSharedBytes => "read_shared_bytes_per_s",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// What was measured with `procs` processes on files of `bytes` bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnvelopePoint {
    /// Processes at work at once; `None`: any number (a flat envelope).
    pub procs: Option<u32>,
    /// File size; `None`: any size.
    pub bytes: Option<u64>,
    /// The rates, indexed by [`Param`]; `None` when not measured.
    pub values: [Option<f64>; 9],
}

impl EnvelopePoint {
    /// A point at `procs` processes and `bytes`-byte files, nothing measured yet.
    pub fn new(procs: u32, bytes: u64) -> Self {
        Self { procs: Some(procs), bytes: Some(bytes), values: [None; 9] }
    }

    /// The value of `param`, if measured.
    pub fn get(&self, param: Param) -> Option<f64> {
        self.values[param.index()]
    }

    /// Sets `param`.
    pub fn set(&mut self, param: Param, value: f64) {
        self.values[param.index()] = Some(value);
    }
}

/// Measured envelope points.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Envelope {
    /// The points, in the order measured or read.
    pub points: Vec<EnvelopePoint>,
}

/// Why an envelope could not be read or did not give a parameter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// The text is not an envelope.
    #[error("not an envelope: {0}")]
    Format(String),
    /// A value is not a positive finite number.
    #[error("point {point}: `{key}` is {value}; rates, process counts and sizes must be positive")]
    NotPositive {
        /// The point's index in `points` (0 for a flat object).
        point: usize,
        /// The key.
        key: String,
        /// The value as written.
        value: String,
    },
    /// The parameter was measured nowhere.
    #[error("the envelope has no `{param}` at all{hint}")]
    Missing {
        /// The parameter.
        param: Param,
        /// How to measure it.
        hint: String,
    },
    /// The stage lies outside what was measured.
    #[error("the envelope does not cover {what}: `{param}` was measured for {measured}; measure there (it does not extrapolate)")]
    NotCovered {
        /// The parameter.
        param: Param,
        /// The stage's coordinate that is outside, e.g. `16 processes`.
        what: String,
        /// The measured range.
        measured: String,
    },
    /// A stage parameter is out of range.
    #[error("{0}")]
    Stage(String),
}

fn positive(point: usize, key: &str, v: &Value) -> Result<f64, EnvelopeError> {
    match v.as_f64() {
        Some(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(EnvelopeError::NotPositive { point, key: key.to_owned(), value: v.to_string() }),
    }
}

fn point_from(point: usize, obj: &Map<String, Value>) -> Result<EnvelopePoint, EnvelopeError> {
    let mut p = EnvelopePoint::default();
    if let Some(v) = obj.get("procs") {
        let x = positive(point, "procs", v)?;
        if x.fract() != 0.0 || x > f64::from(u32::MAX) {
            return Err(EnvelopeError::NotPositive { point, key: "procs".into(), value: v.to_string() });
        }
        p.procs = Some(x as u32);
    }
    if let Some(v) = obj.get("bytes") {
        let x = positive(point, "bytes", v)?;
        if x.fract() != 0.0 {
            return Err(EnvelopeError::NotPositive { point, key: "bytes".into(), value: v.to_string() });
        }
        p.bytes = Some(x as u64);
    }
    for param in Param::ALL {
        if let Some(v) = obj.get(param.key()) {
            if !v.is_null() {
                p.values[param.index()] = Some(positive(point, param.key(), v)?);
            }
        }
    }
    Ok(p)
}

impl Envelope {
    /// Reads `{"points":[...]}`, or one flat object of the point keys.
    pub fn from_json(text: &str) -> Result<Envelope, EnvelopeError> {
        let doc: Value = serde_json::from_str(text).map_err(|e| EnvelopeError::Format(e.to_string()))?;
        let Some(obj) = doc.as_object() else {
            return Err(EnvelopeError::Format("expected a JSON object".into()));
        };
        let points = match obj.get("points") {
            Some(Value::Array(points)) => points
                .iter()
                .enumerate()
                .map(|(i, p)| match p.as_object() {
                    Some(o) => point_from(i, o),
                    None => Err(EnvelopeError::Format(format!("point {i} is not an object"))),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err(EnvelopeError::Format("`points` is not an array".into())),
            None if Param::ALL.iter().any(|p| obj.contains_key(p.key())) => vec![point_from(0, obj)?],
            None => {
                let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
                return Err(EnvelopeError::Format(format!(
                    "expected `points` or the keys of a point (`write_bytes_per_s`, …); found {keys:?}"
                )));
            }
        };
        if points.is_empty() {
            return Err(EnvelopeError::Format("no points".into()));
        }
        Ok(Envelope { points })
    }

    /// `{"points":[...]}`, keys of unmeasured parameters absent.
    pub fn to_json(&self) -> Value {
        let points: Vec<Value> = self
            .points
            .iter()
            .map(|p| {
                let mut m = Map::new();
                if let Some(procs) = p.procs {
                    m.insert("procs".into(), procs.into());
                }
                if let Some(bytes) = p.bytes {
                    m.insert("bytes".into(), bytes.into());
                }
                for param in Param::ALL {
                    if let Some(v) = p.get(param) {
                        m.insert(param.key().into(), v.into());
                    }
                }
                Value::Object(m)
            })
            .collect();
        serde_json::json!({ "points": points })
    }

    /// `param` at `procs` processes and `bytes`-byte files (see the module docs).
    pub fn at(&self, param: Param, procs: u32, bytes: u64) -> Result<f64, EnvelopeError> {
        let with: Vec<&EnvelopePoint> = self.points.iter().filter(|p| p.get(param).is_some()).collect();
        if with.is_empty() {
            let hint = match param {
                Param::ReadRemoteOps | Param::ReadRemoteBytes => ": measure with `--remote DIR`",
                _ => "",
            };
            return Err(EnvelopeError::Missing { param, hint: hint.into() });
        }
        let matches =
            |p: &EnvelopePoint| p.procs.is_none_or(|x| x == procs) && p.bytes.is_none_or(|x| x == bytes);
        if let Some(p) = with.iter().find(|p| matches(p)) {
            return Ok(p.get(param).expect("filtered"));
        }
        // The measured grid of this parameter.
        let mut procs_axis: Vec<u32> = with.iter().filter_map(|p| p.procs).collect();
        let mut bytes_axis: Vec<u64> = with.iter().filter_map(|p| p.bytes).collect();
        procs_axis.sort_unstable();
        procs_axis.dedup();
        bytes_axis.sort_unstable();
        bytes_axis.dedup();
        let (p0, p1) = bracket(&procs_axis, procs).ok_or_else(|| EnvelopeError::NotCovered {
            param,
            what: format!("{procs} processes"),
            measured: range(&procs_axis, " processes"),
        })?;
        let (d0, d1) = bracket(&bytes_axis, bytes).ok_or_else(|| EnvelopeError::NotCovered {
            param,
            what: format!("{bytes}-byte files"),
            measured: range(&bytes_axis, "-byte files"),
        })?;
        let value_at = |p: u32, d: u64| -> Result<f64, EnvelopeError> {
            with.iter()
                .find(|q| q.procs.is_none_or(|x| x == p) && q.bytes.is_none_or(|x| x == d))
                .and_then(|q| q.get(param))
                .ok_or_else(|| EnvelopeError::NotCovered {
                    param,
                    what: format!("{procs} processes and {bytes}-byte files"),
                    measured: format!("no point at {p} processes and {d}-byte files to interpolate from"),
                })
        };
        let t =
            |lo: f64, hi: f64, x: f64| if hi == lo { 0.0 } else { (x.ln() - lo.ln()) / (hi.ln() - lo.ln()) };
        let tp = t(f64::from(p0), f64::from(p1), f64::from(procs));
        let td = t(d0 as f64, d1 as f64, bytes as f64);
        let lerp = |a: f64, b: f64, t: f64| a + (b - a) * t;
        let low = lerp(value_at(p0, d0)?.ln(), value_at(p0, d1)?.ln(), td);
        let high = lerp(value_at(p1, d0)?.ln(), value_at(p1, d1)?.ln(), td);
        Ok(lerp(low, high, tp).exp())
    }
}

/// The measured values around `x`: `(below or equal, above or equal)`; `None` outside.
fn bracket<T: Copy + PartialOrd>(axis: &[T], x: T) -> Option<(T, T)> {
    let i = axis.iter().position(|&a| a >= x)?;
    if axis[i] == x {
        return Some((x, x));
    }
    (i > 0).then(|| (axis[i - 1], axis[i]))
}

fn range<T: fmt::Display>(axis: &[T], unit: &str) -> String {
    match (axis.first(), axis.last()) {
        (Some(a), Some(b)) if axis.len() > 1 => format!("{a} to {b}{unit}"),
        (Some(a), _) => format!("{a}{unit} only"),
        _ => "nothing".into(),
    }
}

/// What a stage does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageKind {
    /// Each task creates and writes its own file.
    Write,
    /// Each task reads its own file (and, with a shared file, reads that too).
    Read,
}

/// A many-task stage.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    /// Write or read.
    pub kind: StageKind,
    /// Tasks, `N`.
    pub tasks: u64,
    /// Nodes (one worker process each), `C`.
    pub nodes: u32,
    /// Each task's file size, `D`.
    pub bytes: u64,
    /// Fraction of reads that are local, `A` (read stages; 1 by default).
    pub local_fraction: f64,
    /// The size of a shared file every task also reads, `D_N` (read stages).
    pub shared_bytes: Option<u64>,
}

/// What bounds a term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The operations per second.
    Throughput,
    /// The bytes per second.
    Bandwidth,
}

impl Bound {
    /// `throughput` or `bandwidth`.
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Throughput => "throughput",
            Bound::Bandwidth => "bandwidth",
        }
    }
}

/// One term of a prediction, over all rounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Term {
    /// `create`, `write`, `read_local`, `read_remote`, `read_shared`.
    pub name: &'static str,
    /// Seconds, all rounds.
    pub seconds: f64,
    /// What bounds it.
    pub bound: Bound,
}

/// A stage's predicted I/O time.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Seconds.
    pub seconds: f64,
    /// Rounds, `⌈N/C⌉`.
    pub rounds: u64,
    /// The terms, which add up to `seconds`.
    pub terms: Vec<Term>,
}

impl Prediction {
    /// `{"seconds","rounds","terms":[{"name","seconds","bound"}]}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "seconds": self.seconds,
            "rounds": self.rounds,
            "terms": self.terms.iter().map(|t| serde_json::json!({"name": t.name, "seconds": t.seconds, "bound": t.bound.as_str()})).collect::<Vec<_>>(),
        })
    }
}

/// `max(ops/T, bytes/B)` per round, and which one it was. At the size the rates were measured
/// at the two are equal (bytes/s = files/s × size): a tie, to within rounding, is bandwidth.
fn larger(ops_s: f64, bytes_s: f64) -> (f64, Bound) {
    if bytes_s >= ops_s * (1.0 - 1e-9) {
        (bytes_s, Bound::Bandwidth)
    } else {
        (ops_s, Bound::Throughput)
    }
}

/// The stage's predicted I/O time from `envelope` (see the module docs for the formulas).
pub fn predict(envelope: &Envelope, stage: &Stage) -> Result<Prediction, EnvelopeError> {
    if stage.tasks == 0 || stage.nodes == 0 || stage.bytes == 0 {
        return Err(EnvelopeError::Stage("tasks, nodes and bytes must be positive".into()));
    }
    if !(0.0..=1.0).contains(&stage.local_fraction) {
        return Err(EnvelopeError::Stage(format!(
            "the local fraction {} is not between 0 and 1",
            stage.local_fraction
        )));
    }
    if stage.shared_bytes == Some(0) {
        return Err(EnvelopeError::Stage("the shared file's size must be positive".into()));
    }
    let (c, d) = (stage.nodes, stage.bytes);
    let (cf, df) = (f64::from(c), d as f64);
    let rounds = stage.tasks.div_ceil(u64::from(c));
    let r = rounds as f64;
    let at = |p: Param| envelope.at(p, c, d);
    let mut terms = Vec::new();
    match stage.kind {
        StageKind::Write => {
            // T_m per process = aggregate / C: one create per process per round.
            let create = at(Param::CreateOps)?;
            terms.push(Term { name: "create", seconds: r * cf / create, bound: Bound::Throughput });
            let (s, bound) = larger(cf / at(Param::WriteOps)?, cf * df / at(Param::WriteBytes)?);
            terms.push(Term { name: "write", seconds: r * s, bound });
        }
        StageKind::Read => {
            let a = stage.local_fraction;
            if a > 0.0 {
                let (s, bound) =
                    larger(a * cf / at(Param::ReadLocalOps)?, cf * a * df / at(Param::ReadLocalBytes)?);
                terms.push(Term { name: "read_local", seconds: r * s, bound });
            }
            if a < 1.0 {
                let (s, bound) = larger(
                    (1.0 - a) * cf / at(Param::ReadRemoteOps)?,
                    cf * (1.0 - a) * df / at(Param::ReadRemoteBytes)?,
                );
                terms.push(Term { name: "read_remote", seconds: r * s, bound });
            }
            if let Some(dn) = stage.shared_bytes {
                let shared = |p: Param| envelope.at(p, c, dn);
                let (s, bound) = larger(
                    cf / shared(Param::ReadSharedOps)?,
                    cf * dn as f64 / shared(Param::ReadSharedBytes)?,
                );
                terms.push(Term { name: "read_shared", seconds: r * s, bound });
            }
        }
    }
    let seconds = terms.iter().map(|t| t.seconds).sum();
    Ok(Prediction { seconds, rounds, terms })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(procs: u32, bytes: u64, values: &[(Param, f64)]) -> EnvelopePoint {
        let mut p = EnvelopePoint::new(procs, bytes);
        for &(k, v) in values {
            p.set(k, v);
        }
        p
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// Write: 10 tasks on 4 nodes, 3 rounds; creates 400/s in all (100/s a process), 80 files/s,
    /// 40 MB/s; 1 MB files. Per round: 4/400 = 0.01 s of creates; writes max(4/80, 4 MB/40 MB/s)
    /// = max(0.05, 0.1) = 0.1 s, bandwidth-bound. Total 3 × 0.11 = 0.33 s.
    #[test]
    fn write_by_hand() {
        use Param::*;
        let env = Envelope {
            points: vec![point(4, 1_000_000, &[(CreateOps, 400.0), (WriteOps, 80.0), (WriteBytes, 40e6)])],
        };
        let stage = Stage {
            kind: StageKind::Write,
            tasks: 10,
            nodes: 4,
            bytes: 1_000_000,
            local_fraction: 1.0,
            shared_bytes: None,
        };
        let p = predict(&env, &stage).unwrap();
        assert_eq!(p.rounds, 3);
        assert_eq!(p.terms.len(), 2);
        assert!(close(p.terms[0].seconds, 0.03) && p.terms[0].bound == Bound::Throughput, "{p:?}");
        assert!(close(p.terms[1].seconds, 0.3) && p.terms[1].bound == Bound::Bandwidth, "{p:?}");
        assert!(close(p.seconds, 0.33));
        // Small files: 4/80 = 0.05 s against 4 kB/40 MB/s: throughput-bound.
        let env = Envelope {
            points: vec![point(4, 1000, &[(CreateOps, 400.0), (WriteOps, 80.0), (WriteBytes, 40e6)])],
        };
        let p = predict(&env, &Stage { bytes: 1000, ..stage }).unwrap();
        assert!(close(p.terms[1].seconds, 0.15) && p.terms[1].bound == Bound::Throughput, "{p:?}");
        let json = p.to_json();
        assert_eq!(json["terms"][1]["bound"], "throughput");
        assert_eq!(json["rounds"], 3);
    }

    /// Read: 8 tasks on 2 nodes (4 rounds), 3/4 local; 1 MB files; a 10 MB shared file.
    /// Local: max(0.75·2/100, 2·0.75·1 MB/50 MB/s) = max(0.015, 0.03) = 0.03;
    /// remote: max(0.25·2/10, 2·0.25·1 MB/5 MB/s) = max(0.05, 0.1) = 0.1;
    /// shared (at 10 MB): max(2/1000, 2·10 MB/100 MB/s) = 0.2. Total 4 × 0.33 = 1.32 s.
    #[test]
    fn read_by_hand() {
        use Param::*;
        let env = Envelope {
            points: vec![
                point(
                    2,
                    1_000_000,
                    &[
                        (ReadLocalOps, 100.0),
                        (ReadLocalBytes, 50e6),
                        (ReadRemoteOps, 10.0),
                        (ReadRemoteBytes, 5e6),
                    ],
                ),
                point(2, 10_000_000, &[(ReadSharedOps, 1000.0), (ReadSharedBytes, 100e6)]),
            ],
        };
        let stage = Stage {
            kind: StageKind::Read,
            tasks: 8,
            nodes: 2,
            bytes: 1_000_000,
            local_fraction: 0.75,
            shared_bytes: Some(10_000_000),
        };
        let p = predict(&env, &stage).unwrap();
        let secs: Vec<f64> = p.terms.iter().map(|t| t.seconds).collect();
        assert!(close(secs[0], 0.12) && close(secs[1], 0.4) && close(secs[2], 0.8), "{p:?}");
        assert!(close(p.seconds, 1.32));
        // All local, no shared file: one term.
        let p = predict(&env, &Stage { local_fraction: 1.0, shared_bytes: None, ..stage.clone() }).unwrap();
        assert_eq!(p.terms.len(), 1);
        // All remote without remote parameters: an error naming what to measure.
        let local_only =
            Envelope { points: vec![point(2, 1_000_000, &[(ReadLocalOps, 1.0), (ReadLocalBytes, 1.0)])] };
        let e =
            predict(&local_only, &Stage { local_fraction: 0.0, shared_bytes: None, ..stage }).unwrap_err();
        assert!(e.to_string().contains("read_remote_ops_per_s") && e.to_string().contains("--remote"), "{e}");
    }

    /// Between measured points: log-log linear, exact at the points, never outside them.
    #[test]
    fn interpolation_and_coverage() {
        use Param::WriteBytes;
        let env = Envelope {
            points: vec![
                point(1, 1024, &[(WriteBytes, 100.0)]),
                point(1, 4096, &[(WriteBytes, 400.0)]),
                point(4, 1024, &[(WriteBytes, 200.0)]),
                point(4, 4096, &[(WriteBytes, 800.0)]),
            ],
        };
        assert_eq!(env.at(WriteBytes, 4, 4096).unwrap(), 800.0);
        // Halfway in log size at 1 process: sqrt(100 × 400) = 200.
        assert!(close(env.at(WriteBytes, 1, 2048).unwrap(), 200.0));
        // Halfway in both: sqrt(sqrt(100·400) · sqrt(200·800)) = sqrt(200 · 400).
        assert!(close(env.at(WriteBytes, 2, 2048).unwrap(), (200.0f64 * 400.0).sqrt()));
        let e = env.at(WriteBytes, 8, 1024).unwrap_err();
        assert!(e.to_string().contains("8 processes") && e.to_string().contains("1 to 4 processes"), "{e}");
        let e = env.at(WriteBytes, 2, 512).unwrap_err();
        assert!(e.to_string().contains("512-byte files"), "{e}");
        // A hole in the grid is refused too.
        let holed = Envelope { points: env.points[..3].to_vec() };
        assert!(holed.at(WriteBytes, 2, 2048).unwrap_err().to_string().contains("no point at 4 processes"));
    }

    #[test]
    fn reading_envelopes_and_bad_input() {
        let env = Envelope::from_json(
            r#"{"points":[{"procs":2,"bytes":1024,"write_bytes_per_s":5e6,"create_ops_per_s":100}]}"#,
        )
        .unwrap();
        assert_eq!(env.points[0].get(Param::WriteBytes), Some(5e6));
        assert_eq!(env.points[0].get(Param::ReadLocalOps), None, "absent, not zero");
        assert_eq!(Envelope::from_json(&env.to_json().to_string()).unwrap(), env);
        // A flat object holds anywhere.
        let flat = Envelope::from_json(r#"{"write_bytes_per_s": 1e6}"#).unwrap();
        assert_eq!(flat.at(Param::WriteBytes, 64, 1 << 30).unwrap(), 1e6);
        for (text, needle) in [
            (r#"{"points":[{"procs":2,"bytes":1024,"write_bytes_per_s":-5}]}"#, "`write_bytes_per_s` is -5"),
            (r#"{"points":[{"procs":0,"bytes":1024}]}"#, "`procs` is 0"),
            (r#"{"points":[{"procs":1.5}]}"#, "`procs` is 1.5"),
            (r#"{"write_bytes_per_s": 0}"#, "is 0"),
            (r#"{"points":[]}"#, "no points"),
            (r#"{"hello": 1}"#, "[\"hello\"]"),
            ("[1]", "expected a JSON object"),
            ("{", "not an envelope"),
        ] {
            let e = Envelope::from_json(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
        let env = Envelope::from_json(r#"{"write_bytes_per_s": 1e6}"#).unwrap();
        let stage = Stage {
            kind: StageKind::Write,
            tasks: 1,
            nodes: 1,
            bytes: 1,
            local_fraction: 1.0,
            shared_bytes: None,
        };
        assert!(predict(&env, &stage).unwrap_err().to_string().contains("create_ops_per_s"));
        assert!(predict(&env, &Stage { tasks: 0, ..stage.clone() }).is_err());
        assert!(predict(&env, &Stage { local_fraction: 1.5, ..stage })
            .unwrap_err()
            .to_string()
            .contains("1.5"));
    }
}

/// One cell of a heatmap: the stage's predicted bandwidth and what bounds its largest term.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// Bytes per second (`N·D` over the predicted time); `None` when the envelope does not
    /// cover the cell.
    pub bytes_per_s: Option<f64>,
    /// What bounds the term that takes the most time.
    pub bound: Option<Bound>,
}

/// A grid of predictions: `rows` × `columns` (file sizes).
#[derive(Clone, Debug, PartialEq)]
pub struct Heatmap {
    /// What the rows count: `tasks` or `processes`.
    pub rows_are: &'static str,
    /// The row values.
    pub rows: Vec<u64>,
    /// The file sizes.
    pub columns: Vec<u64>,
    /// `cells[row][column]`.
    pub cells: Vec<Vec<Cell>>,
}

/// The sizes and process counts an envelope was measured at, sorted.
pub fn measured_axes(envelope: &Envelope) -> (Vec<u32>, Vec<u64>) {
    let mut procs: Vec<u32> = envelope.points.iter().filter_map(|p| p.procs).collect();
    let mut sizes: Vec<u64> = envelope.points.iter().filter_map(|p| p.bytes).collect();
    procs.sort_unstable();
    procs.dedup();
    sizes.sort_unstable();
    sizes.dedup();
    (procs, sizes)
}

fn cell(envelope: &Envelope, stage: &Stage) -> Cell {
    match predict(envelope, stage) {
        Ok(p) => Cell {
            bytes_per_s: Some(stage.tasks as f64 * stage.bytes as f64 / p.seconds),
            bound: p.terms.iter().max_by(|a, b| a.seconds.total_cmp(&b.seconds)).map(|t| t.bound),
        },
        Err(_) => Cell { bytes_per_s: None, bound: None },
    }
}

/// The predicted bandwidth of `stage` over (tasks × file size), at its node count, and over
/// (processes × file size), at its task count: the file sizes and process counts measured, the
/// task counts 1 to 4096 in powers of four.
pub fn heatmaps(envelope: &Envelope, stage: &Stage) -> [Heatmap; 2] {
    let (procs, sizes) = measured_axes(envelope);
    let tasks: Vec<u64> = (0..7).map(|k| 4u64.pow(k)).collect();
    let by_tasks = Heatmap {
        rows_are: "tasks",
        cells: tasks
            .iter()
            .map(|&n| {
                sizes
                    .iter()
                    .map(|&d| cell(envelope, &Stage { tasks: n, bytes: d, ..stage.clone() }))
                    .collect()
            })
            .collect(),
        rows: tasks,
        columns: sizes.clone(),
    };
    let by_procs = Heatmap {
        rows_are: "processes",
        cells: procs
            .iter()
            .map(|&c| {
                sizes
                    .iter()
                    .map(|&d| cell(envelope, &Stage { nodes: c, bytes: d, ..stage.clone() }))
                    .collect()
            })
            .collect(),
        rows: procs.iter().map(|&c| u64::from(c)).collect(),
        columns: sizes,
    };
    [by_tasks, by_procs]
}

/// A size for labels: `4K`, `1M`, `8M`, `512`.
pub fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}G", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

/// The heatmaps as one SVG: a panel each, cells shaded by predicted bandwidth (darker: more;
/// logarithmic), labelled with it in MB/s and `B` (bandwidth-bound) or `T` (throughput-bound);
/// uncovered cells blank. Drawn cells have the class `mark`.
pub fn heatmaps_svg(maps: &[Heatmap], title: &str) -> String {
    use std::fmt::Write as _;
    let (cw, ch, left, top) = (86.0, 26.0, 90.0, 48.0);
    let values: Vec<f64> =
        maps.iter().flat_map(|m| m.cells.iter().flatten().filter_map(|c| c.bytes_per_s)).collect();
    let (lo, hi) = values.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let widths: Vec<f64> =
        maps.iter().map(|m| (left + cw * m.columns.len() as f64 + 30.0).max(400.0)).collect();
    let width = widths.iter().sum::<f64>().max(200.0);
    let height = top + ch * maps.iter().map(|m| m.rows.len()).max().unwrap_or(0) as f64 + 40.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" data-chart=\"envelope\" width=\"{width:.0}\" height=\"{height:.0}\" \
         font-family=\"sans-serif\" font-size=\"11\"><text x=\"4\" y=\"14\" font-size=\"13\">{}</text>",
        crate::markup::escape(title)
    );
    let mut x0 = 0.0;
    for (m, w) in maps.iter().zip(&widths) {
        let _ = write!(
            svg,
            "<text x=\"{:.0}\" y=\"34\">predicted bandwidth by {} (rows) and file size (columns)</text>",
            x0 + 4.0,
            m.rows_are
        );
        for (j, &d) in m.columns.iter().enumerate() {
            let _ = write!(
                svg,
                "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{}</text>",
                x0 + left + cw * (j as f64 + 0.5),
                top + ch * m.rows.len() as f64 + 14.0,
                size_label(d)
            );
        }
        for (i, &r) in m.rows.iter().enumerate() {
            let y = top + ch * i as f64;
            let _ = write!(
                svg,
                "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\">{r} {}</text>",
                x0 + left - 6.0,
                y + 17.0,
                m.rows_are
            );
            for (j, c) in m.cells[i].iter().enumerate() {
                let x = x0 + left + cw * j as f64;
                let Some(v) = c.bytes_per_s else {
                    let _ = write!(svg, "<rect x=\"{x:.0}\" y=\"{y:.0}\" width=\"{cw}\" height=\"{ch}\" fill=\"#f4f4f4\" stroke=\"#fff\"/>");
                    continue;
                };
                let t = if hi > lo { (v.ln() - lo.ln()) / (hi.ln() - lo.ln()) } else { 1.0 };
                let light = 92.0 - 60.0 * t;
                let bound = match c.bound {
                    Some(Bound::Bandwidth) => "B",
                    Some(Bound::Throughput) => "T",
                    None => "",
                };
                let ink = if light < 55.0 { "#fff" } else { "#000" };
                let _ = write!(
                    svg,
                    "<rect class=\"mark\" x=\"{x:.0}\" y=\"{y:.0}\" width=\"{cw}\" height=\"{ch}\" fill=\"hsl(210, 70%, {light:.0}%)\" stroke=\"#fff\">\
                     <title>{r} {}, {}: {:.1} MB/s, {}-bound</title></rect>\
                     <text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"middle\" fill=\"{ink}\">{:.0} {bound}</text>",
                    m.rows_are,
                    size_label(m.columns[j]),
                    v / 1e6,
                    c.bound.map_or("?", Bound::as_str),
                    x + cw / 2.0,
                    y + 17.0,
                    v / 1e6
                );
            }
        }
        x0 += w;
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod heatmap_tests {
    use super::*;

    #[test]
    fn heatmaps_cover_what_was_measured_and_name_the_bound() {
        let mut points = Vec::new();
        for procs in [1, 2] {
            for bytes in [4096, 1 << 20] {
                let mut p = EnvelopePoint::new(procs, bytes);
                p.set(Param::CreateOps, 1e4);
                p.set(Param::WriteOps, 5e3);
                p.set(Param::WriteBytes, 1e9);
                points.push(p);
            }
        }
        let env = Envelope { points };
        let stage = Stage {
            kind: StageKind::Write,
            tasks: 64,
            nodes: 2,
            bytes: 4096,
            local_fraction: 1.0,
            shared_bytes: None,
        };
        let [by_tasks, by_procs] = heatmaps(&env, &stage);
        assert_eq!(by_tasks.columns, [4096, 1 << 20]);
        assert_eq!(by_procs.rows, [1, 2]);
        // Small files: throughput-bound; large: bandwidth-bound.
        assert_eq!(by_procs.cells[1][0].bound, Some(Bound::Throughput));
        assert_eq!(by_procs.cells[1][1].bound, Some(Bound::Bandwidth));
        let svg = heatmaps_svg(&[by_tasks, by_procs], "write, 2 nodes");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("class=\"mark\"").count(), 7 * 2 + 2 * 2);
        assert!(svg.contains("1M") && svg.contains(" T<") && svg.contains(" B<"), "{svg}");
    }
}
