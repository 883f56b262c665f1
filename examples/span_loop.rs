//! Records N spans (`info_span!` with one integer field, enter, exit, drop) under one
//! configuration, for instruction counting with `valgrind --tool=callgrind`:
//!
//! ```sh
//! cargo build --release --example span_loop
//! valgrind --tool=callgrind --separate-threads=yes target/release/examples/span_loop ring_subscriber 100000
//! ```
//!
//! Configurations: `none`, `null_subscriber`, `noop_layer`, `floor_subscriber`, `floor_layer`
//! (the least any span recorder must do, `ringtrace_test_support::subscribers`),
//! `floor_layer_fields` and `floor_layer_disk` (that floor keeping every field, in memory or
//! written to a file: `FloorLayer::all_fields`, `FloorLayer::to_file`), `ringlayer`, `init`
//! (what `ringtrace::init()` installs: the standalone subscriber, for `info`), `ring_subscriber`,
//! `ringlayer_paused`, `ring_subscriber_paused`, `ring_subscriber_recording` (like
//! `ring_subscriber`, but the drain writes the local raw recording to a temporary directory,
//! removed afterwards), `ringlayer_recording` (the layer over the registry, recording likewise,
//! as the demo cluster does) and `ring_subscriber_otlp_recording` (through the OTLP recording
//! sink: the drain assembles and encodes every span). With `--separate-threads=yes`, the
//! drain's and the writer's threads are counted apart from the recording thread.
//!
//! Spans: with `SPAN_LOOP_EVENT=1` set, each span holds one `info!` event with one integer field
//! (the difference is the cost of an event); with `SPAN_LOOP_FIELDS=1`, each span has eight
//! integer fields instead of one; with `SPAN_LOOP_STRINGS=1`, four short string fields; with
//! `SPAN_LOOP_IO=1`, each span is the `send` of one byte on a `ringtrace::io::TcpStream` over
//! loopback (the demo's commonest span: 17 fields, both ends' addresses), the byte read back
//! unrecorded (a system call counts as a few instructions).
//!
//! The inclusive cost of `span_loop::spans` for two values of N,
//! differenced, gives the instructions per span of the recording thread, free of set-up costs
//! (`quanta`'s calibration, which varies from run to run, is done before the loop).

use tracing_subscriber::prelude::*;

use ringtrace_test_support::spans;
use ringtrace_test_support::subscribers::{FloorLayer, FloorSubscriber, NoopLayer, NullSubscriber};

fn spans(n: u64) {
    fn each(n: u64, mut span: impl FnMut(u64)) {
        for i in 0..n {
            span(i);
        }
    }
    if std::env::var_os("SPAN_LOOP_IO").is_some() {
        // The demo's most common span: a `send` on a TCP stream over loopback (`ringtrace::io`'s
        // wrapper: 17 fields, the two ends' addresses among them), the byte read back at once on
        // the other end (not recorded) so that the socket's buffer never fills.
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = ringtrace::io::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let mut byte = [0u8; 1];
        each(n, |_| {
            client.write_all(b"x").unwrap();
            server.read_exact(&mut byte).unwrap();
        })
    } else if std::env::var_os("SPAN_LOOP_EVENT").is_some() {
        each(n, spans::span_with_event)
    } else if std::env::var_os("SPAN_LOOP_FIELDS").is_some() {
        each(n, spans::fields_8)
    } else if std::env::var_os("SPAN_LOOP_STRINGS").is_some() {
        each(n, spans::strings_4)
    } else {
        each(n, spans::one_span)
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let config = args.next().unwrap_or_else(|| "ring_subscriber".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    // `quanta` calibrates its clock once per process, on first use, for a time rather than a
    // number of steps: done here, its varying instruction count stays out of the spans' count.
    drop(ringtrace_core::clock::Clock::new());
    let builder =
        ringtrace::Builder::new().node("bench").daemon("bench").no_recording().ring_capacity(1 << 20);
    match config.as_str() {
        "none" => spans(n),
        "null_subscriber" => tracing::subscriber::with_default(NullSubscriber::default(), || spans(n)),
        "floor_subscriber" => tracing::subscriber::with_default(FloorSubscriber::default(), || spans(n)),
        "floor_layer" => tracing::subscriber::with_default(
            tracing_subscriber::registry().with(FloorLayer::default()),
            || spans(n),
        ),
        "floor_layer_fields" => tracing::subscriber::with_default(
            tracing_subscriber::registry().with(FloorLayer::all_fields()),
            || spans(n),
        ),
        "floor_layer_disk" => {
            let path = std::env::temp_dir().join(format!("ringtrace-span-loop-{}.floor", std::process::id()));
            let file = std::fs::File::create(&path).unwrap();
            tracing::subscriber::with_default(
                tracing_subscriber::registry().with(FloorLayer::to_file(file)),
                || spans(n),
            );
            let _ = std::fs::remove_file(&path);
        }
        "noop_layer" => {
            tracing::subscriber::with_default(tracing_subscriber::registry().with(NoopLayer), || spans(n))
        }
        "ringlayer" | "ringlayer_paused" => {
            let (layer, guard) = builder.build().unwrap();
            if config.ends_with("paused") {
                guard.handle().pause();
            }
            tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || spans(n));
            eprintln!("{}", guard.shutdown().unwrap());
        }
        "init" => {
            // What `ringtrace::init()` installs, as the global default: for `RUST_LOG`'s target
            // and level directives (else `info`), the standalone subscriber.
            let guard = builder.init().unwrap();
            spans(n);
            eprintln!("{}", guard.shutdown().unwrap());
        }
        "ring_subscriber" | "ring_subscriber_paused" => {
            let (subscriber, guard) = builder.build_subscriber().unwrap();
            if config.ends_with("paused") {
                guard.handle().pause();
            }
            tracing::subscriber::with_default(subscriber, || spans(n));
            eprintln!("{}", guard.shutdown().unwrap());
        }
        "ring_subscriber_recording" | "ring_subscriber_otlp_recording" | "ringlayer_recording" => {
            let dir = std::env::temp_dir().join(format!("ringtrace-span-loop-{}", std::process::id()));
            let builder = if config == "ring_subscriber_otlp_recording" {
                builder.sink(
                    ringtrace::RecordingSink::create(&dir, "bench", "bench", std::process::id()).unwrap(),
                )
            } else {
                builder.recording_dir(&dir)
            };
            if config == "ringlayer_recording" {
                let (layer, guard) = builder.build().unwrap();
                tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || spans(n));
                eprintln!("{}", guard.shutdown().unwrap());
            } else {
                let (subscriber, guard) = builder.build_subscriber().unwrap();
                tracing::subscriber::with_default(subscriber, || spans(n));
                eprintln!("{}", guard.shutdown().unwrap());
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
        other => {
            eprintln!("unknown configuration {other:?}");
            std::process::exit(2);
        }
    }
}
