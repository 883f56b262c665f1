//! `ringtrace deps`: the service dependency graph and the node graph.

use std::io::Write;

use clap::{Args, ValueEnum};
use ringtrace_analysis::dependency_graph;
use ringtrace_analysis::deps_output::{self, DotLevel};

use crate::input::{Loaded, TraceInputs};

/// Which graph `deps --dot` draws.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum GraphLevel {
    /// Daemon → daemon.
    Daemon,
    /// Node → node.
    Node,
}

/// Arguments of `ringtrace deps`.
#[derive(Args, Debug)]
pub struct DepsArgs {
    /// Print JSON: {"services":[{"parent","child","call_count","error_count"}],"nodes":[...]}.
    #[arg(long, conflicts_with = "dot")]
    pub json: bool,
    /// Print a Graphviz digraph of the daemon graph (or the node graph with --level node).
    #[arg(long)]
    pub dot: bool,
    /// The graph --dot draws.
    #[arg(long, value_enum, default_value = "daemon", requires = "dot")]
    pub level: GraphLevel,
    #[command(flatten)]
    pub input: TraceInputs,
}

/// Runs `ringtrace deps`.
pub fn run(args: DepsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let graph = match crate::input::store_input(&args.input.inputs)? {
        #[cfg(feature = "store")]
        Some(store) => {
            crate::input::on_store(&store, |s| s.dependency_graph(&args.input.causality_options()))?
        }
        #[cfg(not(feature = "store"))]
        Some(never) => match never {},
        None => {
            let Loaded { data, causality } = args.input.load()?;
            dependency_graph(&data, &causality)
        }
    };
    if args.json {
        deps_output::write_json(&graph, out)?;
    } else if args.dot {
        let level = match args.level {
            GraphLevel::Daemon => DotLevel::Daemon,
            GraphLevel::Node => DotLevel::Node,
        };
        deps_output::write_dot(&graph, level, out)?;
    } else {
        deps_output::write_table(&graph, out)?;
    }
    Ok(())
}
