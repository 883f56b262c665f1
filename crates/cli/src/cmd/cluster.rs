//! `ringtrace cluster scheduler|executor`: a Ballista cluster in the `ringtrace` binary, so that
//! the views over a Parquet store run their plans on many machines (`--scheduler df://HOST:PORT`)
//! on the same engine, at the same version, as they run in one process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub role: Role,
}

#[derive(Subcommand, Debug)]
pub enum Role {
    /// A Ballista scheduler: plans each query into stages and hands their tasks to the
    /// executors. The views reach it with `--scheduler df://HOST:PORT`.
    Scheduler(SchedulerArgs),
    /// A Ballista executor: runs the tasks its scheduler hands it, reading the store's files at
    /// the path the view gave (so on a file system every machine shares).
    Executor(ExecutorArgs),
}

#[derive(Args, Debug)]
pub struct SchedulerArgs {
    /// IP address to listen on.
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    pub bind: String,
    /// Port of its gRPC service.
    #[arg(long, default_value_t = 50050)]
    pub port: u16,
}

#[derive(Args, Debug)]
pub struct ExecutorArgs {
    /// The scheduler's host (its address or name).
    #[arg(long, default_value = "127.0.0.1", value_name = "HOST")]
    pub scheduler_host: String,
    /// The scheduler's port (its `--port`).
    #[arg(long, default_value_t = 50050, value_name = "PORT")]
    pub scheduler_port: u16,
    /// IP address to listen on, and to give the scheduler for the others to reach this
    /// executor.
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    pub bind: String,
    /// Port of its Arrow Flight service, where results are fetched.
    #[arg(long, default_value_t = 50051)]
    pub port: u16,
    /// Port of its gRPC service.
    #[arg(long, default_value_t = 50052)]
    pub grpc_port: u16,
    /// Tasks it runs at once [default: the machine's cores].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub tasks: Option<u64>,
    /// Directory for its shuffle files [default: a new one under the system's temporary
    /// directory].
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
}

/// Runs the scheduler or the executor until the process is stopped.
pub fn run(args: ClusterArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        match args.role {
            Role::Scheduler(args) => scheduler(args).await,
            Role::Executor(args) => executor(args).await,
        }
    })
}

async fn scheduler(args: SchedulerArgs) -> anyhow::Result<()> {
    use ballista_scheduler::cluster::BallistaCluster;
    use ballista_scheduler::config::SchedulerConfig;
    let ip: std::net::IpAddr =
        args.bind.parse().with_context(|| format!("--bind {:?}: not an IP address", args.bind))?;
    let address = SocketAddr::new(ip, args.port);
    let config = SchedulerConfig {
        bind_host: args.bind.clone(),
        bind_port: args.port,
        external_host: args.bind,
        ..SchedulerConfig::default()
    };
    let cluster = BallistaCluster::new_from_config(&config).await?;
    ballista_scheduler::scheduler_process::start_server(cluster, address, Arc::new(config)).await?;
    Ok(())
}

async fn executor(args: ExecutorArgs) -> anyhow::Result<()> {
    use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
    args.bind
        .parse::<std::net::IpAddr>()
        .with_context(|| format!("--bind {:?}: not an IP address", args.bind))?;
    let defaults = ExecutorProcessConfig::default();
    let config = ExecutorProcessConfig {
        bind_host: args.bind.clone(),
        external_host: Some(args.bind),
        port: args.port,
        grpc_port: args.grpc_port,
        scheduler_host: args.scheduler_host,
        scheduler_port: args.scheduler_port,
        // The scheduler may still be starting.
        scheduler_connect_timeout_seconds: 30,
        vcores: args.tasks.map_or(defaults.vcores, |n| usize::try_from(n).unwrap_or(usize::MAX)),
        work_dir: args.work_dir.map(|d| d.display().to_string()),
        ..defaults
    };
    start_executor_process(Arc::new(config)).await?;
    Ok(())
}
