//! temp
mod common;
use common::*;
use ringtrace_core::otlp::KeyValue;
#[test]
fn perf() {
    let dir = TempDir::new("perf");
    let mut frames = Vec::new();
    let mut id = 0u64;
    for f in 0..1000u64 {
        let spans = (0..1000).map(|_| { id += 1; let mut s = span(1, 1, None, "store", f * 1_000_000, f * 1_000_000 + 500);
            s.span_id = id.to_be_bytes().to_vec();
            s.attributes.extend([KeyValue::string("code.namespace", "demo::worker"), KeyValue::string("code.filepath", "src/worker.rs"), KeyValue::int("code.lineno", 42), KeyValue::string("level","INFO"), KeyValue::int("thread.id", 3), KeyValue::string("thread.name","main"), KeyValue::string("request.id","req-0001"), KeyValue::int("bytes", 4096)]);
            s }).collect();
        frames.push(frame(resource("node-1", "worker", 1, [0; 4]), spans));
    }
    let bytes = recording(&frames);
    let path = dir.file("big.otlp", &bytes);
    let t = std::time::Instant::now();
    let data = ringtrace_analysis::read_inputs(&[&path]).unwrap();
    let el = t.elapsed();
    println!("{} spans, {} MB, read_inputs {:?} = {:.0} ns/span", data.spans.len(), bytes.len() / 1_000_000, el, el.as_nanos() as f64 / data.spans.len() as f64);
    let t = std::time::Instant::now();
    let mut n = 0; ringtrace_analysis::for_each_batch(&path, &mut |b| n += b.spans.len()).unwrap();
    let el = t.elapsed();
    println!("for_each_batch {:?} = {:.0} ns/span", el, el.as_nanos() as f64 / n as f64);
    let t = std::time::Instant::now();
    let p = ringtrace_analysis::frequency_profile(&data, ringtrace_analysis::GroupBy::Method, 1_000_000_000).unwrap();
    let el = t.elapsed();
    println!("profile by method {:?} = {:.0} ns/span ({} groups)", el, el.as_nanos() as f64 / n as f64, p.groups.len());
}
