//! `ringtrace __demo-node` (hidden): one process of the demo cluster, started by `ringtrace demo`
//! re-executing this binary.

use clap::Args;

/// Arguments of `ringtrace __demo-node`, parsed by [`ringtrace_demo::node_args_from`].
#[derive(Args, Debug)]
pub struct DemoNodeArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Runs one process of the demo cluster to completion.
pub fn run(args: DemoNodeArgs) -> anyhow::Result<()> {
    ringtrace_demo::run_node(ringtrace_demo::node_args_from(&args.args)?)
}
