//! `ringtrace profile`: span counts per time bucket, grouped by node, daemon or method.
//!
//! Without a zoom, measure or phase flag ([`ProfileMore`]) the inputs are streamed: only the
//! per-(group, bucket) counts are kept, whatever the inputs' size. With any of them the spans are
//! read whole and the zoomed profile is printed.

use std::io::Write;

use clap::Args;
use ringtrace_analysis::{
    detect_phases, for_each_batch_as, list_inputs, profile_output, read_inputs_as, time_profile, Detail,
    FrequencyCounter, GroupBy, Measure, PhaseOptions, ProfileQuery, Span,
};

use crate::input::FileInputs;
use crate::load;
use crate::parse::parse_nanos;
use crate::progress::{self, InputProgress};
use crate::zoom::ZoomArgs;

/// Arguments of `ringtrace profile`.
#[derive(Args, Debug)]
// `profile` has always named its inputs `<INPUTS>...` in its usage line.
#[command(mut_arg("inputs", |a| a.value_name("INPUTS")))]
pub struct ProfileArgs {
    /// What to group spans by: node, daemon or method.
    #[arg(long, default_value = "node")]
    pub by: GroupBy,
    /// Bucket width, e.g. 1s, 500ms, 2m (default: a round width — 1, 2 or 5 times a power
    /// of ten — giving 24 to 60 columns over the data's time span).
    #[arg(long, value_parser = parse_nanos)]
    pub bucket: Option<u64>,
    /// Print JSON: {"group_by","bucket_ns","start_unix_ns","groups":[{"key","total","counts"}]}.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV: group,bucket_start_unix_ns,count.
    #[arg(long)]
    pub csv: bool,
    #[command(flatten)]
    pub input: FileInputs,
    #[command(flatten)]
    pub more: ProfileMore,
}

/// Flags that zoom, change the measure or detect phases.
#[derive(Args, Debug, Default, Clone)]
pub struct ProfileMore {
    #[command(flatten)]
    pub zoom: ZoomArgs,
    /// What the table shows per bucket: count, rate (spans/s), total (span time) or self (self
    /// time). JSON and CSV carry all four.
    #[arg(long, value_name = "MEASURE")]
    pub measure: Option<Measure>,
    /// Also mark phase changes: where a group's method mix or rate changes sharply.
    #[arg(long)]
    pub phases: bool,
    /// With --phases: buckets compared on each side of a boundary.
    #[arg(long, value_name = "N", default_value_t = 5, requires = "phases",
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub phase_window: u64,
}

impl ProfileMore {
    /// Whether any of these flags was given.
    pub fn is_set(&self) -> bool {
        self.measure.is_some() || self.phases || self.zoom.is_set()
    }
}

/// Runs `ringtrace profile`.
pub fn run(args: ProfileArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.more.is_set() {
        run_zoomed(&args, out)
    } else {
        run_streamed(&args, out)
    }
}

/// The earliest start and latest end of the spans seen.
#[derive(Default)]
struct TimeSpan {
    start_unix_ns: Option<u64>,
    end_unix_ns: u64,
}

impl TimeSpan {
    fn add(&mut self, s: &Span) {
        self.start_unix_ns = Some(self.start_unix_ns.map_or(s.start_unix_ns, |t| t.min(s.start_unix_ns)));
        self.end_unix_ns = self.end_unix_ns.max(s.end_unix_ns).max(s.start_unix_ns);
    }

    /// The bucket when none is given: a 1-2-5 width giving 24 to 60 columns.
    fn auto_bucket_ns(&self) -> u64 {
        let span_ns = self.start_unix_ns.map_or(0, |start| self.end_unix_ns - start);
        ringtrace_analysis::report::auto_bucket_ns(span_ns)
    }
}

/// The plain profile, streamed: only per-(group, bucket) counts are kept.
fn run_streamed(args: &ProfileArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    #[cfg(feature = "store")]
    if let Some(store) = crate::input::store_input(&args.input.inputs)? {
        let bucket = match args.bucket {
            Some(b) => b,
            None => {
                let (start, end) = store.time_span()?.unwrap_or((0, 0));
                ringtrace_analysis::report::auto_bucket_ns(end - start)
            }
        };
        return write_profile(args, &store.frequency_profile(args.by, bucket)?, out);
    }
    let truncation = load::truncation(args.input.strict);
    let files = list_inputs(&args.input.inputs)?;
    let bucket = match args.bucket {
        Some(b) => b,
        None => {
            // A first pass for the time span alone, so the stream keeps its small memory.
            let progress = InputProgress::new(&files, "finding the time span", progress::on_stderr());
            let mut span = TimeSpan::default();
            for (done, file) in files.iter().enumerate() {
                for_each_batch_as(file, truncation, Detail::Compact, &mut |batch| {
                    batch.spans.iter().for_each(|s| span.add(s))
                })?;
                progress.file_done(done + 1, files.len());
            }
            progress.finish();
            span.auto_bucket_ns()
        }
    };
    let mut counter = FrequencyCounter::new(args.by, bucket)?;
    let mut warnings = Vec::new();
    let progress = InputProgress::new(&files, "counting spans", progress::on_stderr());
    for (done, file) in files.iter().enumerate() {
        warnings.extend(for_each_batch_as(file, truncation, Detail::Compact, &mut |batch| {
            batch.spans.iter().for_each(|s| counter.add(s))
        })?);
        progress.file_done(done + 1, files.len());
    }
    progress.finish();
    load::print_warnings(&warnings, &mut std::io::stderr().lock());
    write_profile(args, &counter.finish()?, out)
}

fn write_profile(
    args: &ProfileArgs,
    profile: &ringtrace_analysis::FrequencyProfile,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if args.json {
        profile_output::write_json(profile, out)?;
    } else if args.csv {
        profile_output::write_csv(profile, out)?;
    } else {
        profile_output::write_table(profile, out)?;
    }
    Ok(())
}

/// The zoomed profile, with its measures and phases.
fn run_zoomed(args: &ProfileArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let more = &args.more;
    if crate::input::store_input(&args.input.inputs)?.is_some() {
        anyhow::bail!("--from, --to, --node, --daemon, --request, --operation, --measure and --phases do not read a Parquet store yet: profile its recordings, or leave them out");
    }
    // Compact, as the views read, but without placing imported I/O calls into traces: the
    // streamed profile cannot, and both must count the same spans.
    let truncation = load::truncation(args.input.strict);
    let outcome = load::showing_progress(&args.input.inputs, |files, on_file| {
        read_inputs_as(files, truncation, Detail::Compact, on_file)
    })?;
    load::print_warnings(&outcome.warnings, &mut std::io::stderr().lock());
    let data = outcome.data;
    let filter = more.zoom.filter(&data);
    let bucket_ns = args.bucket.unwrap_or_else(|| {
        // Over the zoomed time span: the spans kept, clipped to --from/--to.
        let (mut start, mut end) = (u64::MAX, 0);
        for s in data.spans.iter().filter(|s| filter.matches(s)) {
            let clipped_start = s.start_unix_ns.max(filter.from_unix_ns.unwrap_or(0));
            let clipped_end = s.end_unix_ns.max(s.start_unix_ns).min(filter.to_unix_ns.unwrap_or(u64::MAX));
            start = start.min(clipped_start);
            end = end.max(clipped_end).max(clipped_start);
        }
        ringtrace_analysis::report::auto_bucket_ns(end.saturating_sub(start))
    });
    let query = ProfileQuery { by: args.by, bucket_ns, filter };
    let profile = time_profile(&data, &query)?;
    let phases = if more.phases {
        let options = PhaseOptions { window_buckets: more.phase_window as usize, ..Default::default() };
        Some(detect_phases(&data, &query, &options)?)
    } else {
        None
    };
    if args.json {
        profile_output::write_time_json(&profile, phases.as_deref(), out)?;
    } else if args.csv {
        profile_output::write_time_csv(&profile, out)?;
    } else {
        profile_output::write_time_table(&profile, more.measure.unwrap_or_default(), out)?;
        if let Some(phases) = &phases {
            profile_output::write_phases(phases, profile.start_unix_ns, out)?;
        }
    }
    Ok(())
}
