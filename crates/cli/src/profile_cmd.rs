//! The zoom, measure and phase flags of `ringtrace profile`. Without any of them the command
//! prints exactly what it always did; with any, it prints the zoomed profile.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use ringtrace_analysis::{
    detect_phases, profile_output, read_inputs_with, time_profile, GroupBy, Measure, PhaseOptions,
    ProfileQuery,
};

use crate::zoom::ZoomArgs;

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
        let z = &self.zoom;
        self.measure.is_some()
            || self.phases
            || z.from.is_some()
            || z.to.is_some()
            || z.node.is_some()
            || z.daemon.is_some()
            || z.request.is_some()
            || z.operation.is_some()
    }
}

/// The output format `ringtrace profile` was asked for (a table when neither).
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// `--json`.
    pub json: bool,
    /// `--csv`.
    pub csv: bool,
}

/// The zoomed `ringtrace profile`; `strict` refuses a file cut short instead of reading it up to
/// the cut with a warning.
pub fn run(
    by: GroupBy,
    bucket_ns: Option<u64>,
    Output { json, csv }: Output,
    inputs: &[PathBuf],
    strict: bool,
    more: &ProfileMore,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let outcome = read_inputs_with(inputs, crate::load::truncation(strict))?;
    crate::load::print_warnings(&outcome.warnings, &mut std::io::stderr().lock(), true);
    let data = outcome.data;
    let filter = more.zoom.filter(&data);
    let bucket_ns = bucket_ns.unwrap_or_else(|| {
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
    let query = ProfileQuery { by, bucket_ns, filter };
    let profile = time_profile(&data, &query)?;
    let phases = if more.phases {
        let options = PhaseOptions { window_buckets: more.phase_window as usize, ..Default::default() };
        Some(detect_phases(&data, &query, &options)?)
    } else {
        None
    };
    if json {
        profile_output::write_time_json(&profile, phases.as_deref(), out)?;
    } else if csv {
        profile_output::write_time_csv(&profile, out)?;
    } else {
        profile_output::write_time_table(&profile, more.measure.unwrap_or_default(), out)?;
        if let Some(phases) = &phases {
            profile_output::write_phases(phases, profile.start_unix_ns, out)?;
        }
    }
    Ok(())
}
