//! The `switchyard` command line: `serve`, `check`, `tools`, `reload`, `calls`, `keys`, `auth`, `init`, `import`,
//! `healthcheck`, `demo-server`. `serve` reloads its configuration file on `SIGHUP` (and on `switchyard reload`).
//! This is the binary's edge: errors become `anyhow` reports and exit codes here, nowhere else.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use switchyard::config::{Config, LogFormat, parse_log_format};
use switchyard::gateway::Gateway;
use switchyard::gateway::reload::{ConfigSource, Reloader};
use switchyard::ledger::LedgerError;
use switchyard::telemetry::logs;
use tokio::task::JoinHandle;

mod cli;

use cli::ToolsAction;
use cli::calls::{CallsAction, CallsFilter};
use cli::tasks::TasksFilter;

// glibc's allocator cost about a third of the gateway's CPU per call under load (BENCHMARKS.md); mimalloc's
// thread-local free lists fit the many short-lived allocations of request handling.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `--version`: the crate's version and the commit it was built from (`build.rs`; "unknown" outside a checkout).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("SWITCHYARD_COMMIT"), ")");

#[derive(Parser)]
#[command(
    name = "switchyard",
    version = VERSION,
    about = "An MCP gateway: one Streamable HTTP endpoint in front of many MCP servers"
)]
struct Cli {
    /// The configuration file. Default: the file the SWITCHYARD_CONFIG environment variable names, else
    /// ./switchyard.toml if present, else none (the embedded demo backend). A named file must exist. Relative paths
    /// inside it are relative to its directory. Accepted before or after the subcommand.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve agents. Without a configuration file, serves an embedded demo backend.
    Serve {
        /// The address to listen on (overrides `[server] listen`).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// How log lines are written: `text` or `json` (overrides `[telemetry] log_format`).
        #[arg(long, value_name = "FORMAT", value_parser = parse_log_format)]
        log_format: Option<LogFormat>,
    },
    /// Validate the configuration, discover the backends, and print the routing table.
    Check,
    /// Discover the backends and print the tools agents will see; search them as an agent's
    /// `switchyard__search_tools` would; or list, compare, approve or reject pinned tool definitions in the ledger.
    Tools {
        #[command(subcommand)]
        action: Option<ToolsAction>,
    },
    /// Make the running gateway re-read its configuration file (as SIGHUP does) and print what changed; a file
    /// it refuses is reported with the error `check` prints (exit status 1) and changes nothing.
    Reload,
    /// List the ledger's calls, show one, or settle an `unknown` one.
    Calls {
        #[command(subcommand)]
        action: Option<CallsAction>,
        #[command(flatten)]
        filter: CallsFilter,
    },
    /// List the tasks agents created (tool calls run as MCP tasks), oldest first.
    Tasks {
        #[command(flatten)]
        filter: TasksFilter,
    },
    /// Print each [[limits]] entry's current use per principal (from the counters replicas share in a
    /// PostgreSQL ledger).
    Limits,
    /// Make, list and revoke agent API keys.
    Keys {
        #[command(subcommand)]
        action: KeysAction,
    },
    /// Check the audit trail's files.
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// List or delete the OAuth tokens the gateway holds for backends (secrets are never printed).
    Auth {
        #[command(subcommand)]
        action: AuthAction,
    },
    /// Write a commented starter configuration (to --config, else $SWITCHYARD_CONFIG, else ./switchyard.toml) with
    /// one stdio backend: this binary's demo server. An existing file is never overwritten.
    Init,
    /// Print the `[[backends]]` tables for the MCP servers of a Claude Desktop, Cursor, VS Code (mcp.json or
    /// settings.json) or .mcp.json file. Secrets in it become environment variable references (named on stderr,
    /// never printed); names are made valid backend names.
    Import {
        /// The JSON file to read.
        file: PathBuf,
        /// Append the tables to the configuration file (--config, else $SWITCHYARD_CONFIG, else
        /// ./switchyard.toml; created if missing) instead of printing them.
        #[arg(long)]
        write: bool,
    },
    /// Ask a gateway's /healthz whether it serves (for container health checks): exit status 0 on 200 OK, else 1
    /// with the reason.
    Healthcheck {
        /// The URL to ask (`https://127.0.0.1:8808/healthz` when the gateway serves TLS).
        #[arg(long, default_value = cli::healthcheck::DEFAULT_URL)]
        url: String,
        /// For an https URL: trust this PEM certificate (the one that issued the gateway's, or its own
        /// self-signed `tls_cert`), whatever host name it was issued for.
        #[arg(long, value_name = "FILE")]
        ca_cert: Option<PathBuf>,
    },
    /// Run the built-in demo MCP server (tools: echo, add, counter, sleep, fail).
    DemoServer {
        #[arg(long, default_value = "127.0.0.1:8809")]
        listen: SocketAddr,
        /// Speak MCP on stdin/stdout instead of HTTP (a stdio backend for tests and benchmarks).
        #[arg(long, conflicts_with = "listen")]
        stdio: bool,
    },
}

#[derive(Subcommand)]
enum KeysAction {
    /// Print a fresh random key once, and the `[[auth.api_keys]]` lines to paste into switchyard.toml.
    New {
        /// The principal the key authenticates (what policies and the ledger name).
        #[arg(long)]
        principal: String,
        /// A group of the principal (repeat for several).
        #[arg(long = "group")]
        groups: Vec<String>,
    },
    /// List the configured API keys: principal, groups, digest prefix, expiry.
    List,
    /// Remove API keys from the configuration file (comments and the rest kept), then reload the running gateway.
    Revoke {
        /// Every key of this principal.
        #[arg(long, conflicts_with = "sha256", required_unless_present = "sha256")]
        principal: Option<String>,
        /// The one key whose SHA-256 digest starts with this (at least 8 hex digits).
        #[arg(long)]
        sha256: Option<String>,
    },
}

#[derive(Subcommand)]
enum AuditAction {
    /// Check that audit files are complete and unaltered by following their hash chain; give rotated files
    /// oldest first (`audit.jsonl.2 audit.jsonl.1 audit.jsonl`). Exit status 1 names the first break.
    Verify {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Subcommand)]
enum AuthAction {
    /// The stored tokens: backend, principal, scopes, expiry, last change.
    List {
        #[command(flatten)]
        filter: cli::auth::TokenSelection,
    },
    /// Delete stored tokens; the principal authorizes again on its next call.
    Revoke {
        #[command(flatten)]
        filter: cli::auth::TokenSelection,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `serve` installs its log once its configuration says how lines are written.
    if !matches!(cli.command, Command::Serve { .. }) {
        logs::install(logs::LogFormat::Text);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command, cli.config)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", each_cause_once(&error));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, each said once: a cause whose words the text before it already holds
/// (an error that quotes its source) is left out.
fn each_cause_once(error: &anyhow::Error) -> String {
    let mut line = error.to_string();
    for cause in error.chain().skip(1).map(ToString::to_string) {
        if !line.contains(&cause) {
            line.push_str(": ");
            line.push_str(&cause);
        }
    }
    line
}

async fn run(command: Command, config: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve { listen, log_format } => serve(config, listen, log_format).await,
        Command::Check => cli::discovered::check(load_for_discovery(config).await?).await,
        Command::Tools { action: None } => cli::discovered::tools(load_for_discovery(config).await?).await,
        Command::Tools { action: Some(ToolsAction::Search { query, principal, limit }) } => {
            let gateway = load_for_discovery(config).await?;
            cli::discovered::search(gateway, &query, principal.as_deref(), usize::from(limit)).await
        }
        Command::Tools { action: Some(ToolsAction::Pins(action)) } => cli::pins::run(action, config).await,
        Command::Reload => cli::reload::run(config).await,
        Command::DemoServer { stdio: true, .. } => demo_server_stdio().await,
        Command::DemoServer { listen, .. } => demo_server(listen).await,
        Command::Calls { action, filter } => cli::calls::run(action, filter, config).await,
        Command::Tasks { filter } => cli::tasks::list(filter, config).await,
        Command::Limits => cli::limits::run(config).await,
        Command::Keys { action: KeysAction::New { principal, groups } } => cli::keys::new(&principal, &groups),
        Command::Keys { action: KeysAction::List } => cli::keys::list(config.as_deref()),
        Command::Keys { action: KeysAction::Revoke { principal, sha256 } } => {
            cli::keys::revoke(cli::keys::Revoke::of(principal, sha256), config.as_deref()).await
        }
        Command::Auth { action: AuthAction::List { filter } } => cli::auth::list(filter, config).await,
        Command::Auth { action: AuthAction::Revoke { filter } } => cli::auth::revoke(filter, config).await,
        Command::Audit { action: AuditAction::Verify { files } } => cli::audit::verify(&files),
        Command::Init => cli::init::run(config.as_deref()),
        Command::Import { file, write } => cli::import::run(&file, write, config.as_deref()),
        Command::Healthcheck { url, ca_cert } => cli::healthcheck::run(&url, ca_cert.as_deref()).await,
    }
}

/// A loaded configuration, and where it came from.
struct Loaded {
    config: Config,
    /// The file, or `None` for a first run's.
    path: Option<PathBuf>,
    /// The embedded demo backend of a first run.
    demo: Option<JoinHandle<()>>,
}

/// Says in the log where the configuration came from (`file`; `None`: a first run's).
fn announce(file: Option<&Path>) {
    match file {
        Some(path) => tracing::info!(config = %path.display(), "configuration loaded"),
        None => tracing::info!("no configuration file: serving the embedded demo backend `demo`"),
    }
}

/// What `check` and `tools` say when there is no configuration file: they look at what `serve` would serve.
const NO_CONFIGURATION: &str = "no configuration file (no --config, no SWITCHYARD_CONFIG, no ./switchyard.toml): \
                                showing the embedded demo backend `demo`, which `switchyard serve` would serve; \
                                `switchyard init` writes a starter switchyard.toml";

/// The configuration of `--config`, else of the file `SWITCHYARD_CONFIG` names, else of `./switchyard.toml`, else
/// of a first run with the embedded demo backend.
async fn load(config: Option<PathBuf>) -> anyhow::Result<Loaded> {
    match Config::find(config.as_deref())? {
        Some((path, config)) => Ok(Loaded { config, path: Some(path), demo: None }),
        None => {
            let (config, demo) = Gateway::demo_config().await?;
            Ok(Loaded { config, path: None, demo: Some(demo) })
        }
    }
}

/// A gateway for `check` and `tools`, which only discover.
async fn load_for_discovery(config: Option<PathBuf>) -> anyhow::Result<Gateway> {
    let Loaded { config, path, demo } = load(config).await?;
    match &path {
        Some(_) => announce(path.as_deref()),
        None => eprintln!("note: {NO_CONFIGURATION}"),
    }
    let mut gateway = Gateway::for_discovery(config).await?;
    demo.into_iter().for_each(|task| gateway.adopt(task));
    Ok(gateway)
}

async fn serve(
    config: Option<PathBuf>,
    listen: Option<SocketAddr>,
    log_format: Option<LogFormat>,
) -> anyhow::Result<ExitCode> {
    let Loaded { mut config, path, demo } = load(config).await?;
    if let Some(listen) = listen {
        config.server.listen = listen;
    }
    if let Some(format) = log_format {
        config.telemetry.log_format = format;
    }
    logs::install(switchyard::gateway::log_format(&config));
    announce(path.as_deref());
    config.check_serving()?;
    // Before the gateway is built, so that neither a reload nor a stop asked for while it waits for its ledger
    // ends the process by the signal's default action.
    let hangups = hangups()?;
    let stop = Stop::on_signal();
    let address = config.server.listen;
    let listener =
        tokio::net::TcpListener::bind(address).await.with_context(|| format!("cannot listen on {address}"))?;
    let address = listener.local_addr()?;
    let scheme = config.server.scheme();
    let waiting = |error: &LedgerError| {
        println!("Switchyard is waiting for its call ledger before serving MCP at {scheme}://{address}/mcp  ({error})");
    };
    let mut gateway = tokio::select! {
        built = Gateway::build_serving(config, &listener, waiting) => built?,
        () = stop.requested() => return Ok(ExitCode::SUCCESS),
    };
    demo.into_iter().for_each(|task| gateway.adopt(task));
    reload_on_hangup(hangups, gateway.reloader(ConfigSource { path, listen, log_format }));
    let metrics = gateway.bind_metrics().await?.unwrap_or(address);
    print_welcome(&gateway, address, metrics);
    let served = gateway.serve(listener, stop.requested()).await;
    logs::flush();
    served?;
    Ok(ExitCode::SUCCESS)
}

fn print_welcome(gateway: &Gateway, address: SocketAddr, metrics: SocketAddr) {
    let scheme = gateway.config.server.scheme();
    let url = format!("{scheme}://{address}/mcp");
    let backends: Vec<&str> = gateway.config.backends.iter().map(|b| b.name.as_str()).collect();
    println!("Switchyard is serving MCP at {url}  (backends: {})", backends.join(", "));
    // Agents authenticate once `[auth]` has keys: the suggested line must carry the header, or it fails with 401.
    let header = match gateway.config.auth.api_keys.is_empty() {
        true => String::new(),
        false => " --header \"Authorization: Bearer $SWITCHYARD_API_KEY\"  (a key of [[auth.api_keys]]; `switchyard keys new` makes one)".to_owned(),
    };
    println!("  Claude Code:    claude mcp add --transport http switchyard {url}{header}");
    println!("  MCP Inspector:  npx @modelcontextprotocol/inspector  → Streamable HTTP, URL {url}");
    println!("  One backend:    {url}/<backend>  (bare tool names)");
    let telemetry = &gateway.config.telemetry;
    let metrics_scheme = if telemetry.metrics_listen.is_none() || telemetry.metrics_tls { scheme } else { "http" };
    println!("  Metrics:        {metrics_scheme}://{metrics}/metrics  (Prometheus)");
}

/// SIGHUP, handled from the moment this is made (its default action would end the process).
#[cfg(unix)]
type Hangups = tokio::signal::unix::Signal;
#[cfg(not(unix))]
type Hangups = ();

fn hangups() -> anyhow::Result<Hangups> {
    #[cfg(unix)]
    return tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).context("cannot handle SIGHUP");
    #[cfg(not(unix))]
    Ok(())
}

/// Reloads the configuration on every SIGHUP (the gateway logs what the reload did or why it was refused).
fn reload_on_hangup(hangups: Hangups, reloader: Reloader) {
    #[cfg(unix)]
    {
        let mut hangups = hangups;
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::info!("SIGHUP: reloading the configuration");
                // The gateway logs the outcome.
                let _ = reloader.reload().await;
            }
        });
    }
    #[cfg(not(unix))]
    drop((hangups, reloader));
}

/// A stop asked for by SIGINT or SIGTERM, awaited first by the wait for the ledger, then by serving.
struct Stop(tokio::sync::watch::Receiver<bool>);

impl Stop {
    fn on_signal() -> Stop {
        let (asked, stop) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            shutdown_signal().await;
            let _ = asked.send(true);
        });
        Stop(stop)
    }

    fn requested(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stop = self.0.clone();
        async move {
            // The sender only goes away with the runtime; never take that for a stop.
            if stop.wait_for(|asked| *asked).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let Ok(mut terminate) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
            return interrupt.await.unwrap_or_default();
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    interrupt.await.unwrap_or_default();
    tracing::info!("shutting down");
}

async fn demo_server(listen: SocketAddr) -> anyhow::Result<ExitCode> {
    let (address, server) =
        switchyard::demo::spawn(listen).await.with_context(|| format!("cannot listen on {listen}"))?;
    println!("Switchyard demo MCP server at http://{address}/mcp (tools: echo, add, counter, sleep, fail)");
    shutdown_signal().await;
    server.abort();
    Ok(ExitCode::SUCCESS)
}

async fn demo_server_stdio() -> anyhow::Result<ExitCode> {
    switchyard::demo::stdio::serve(tokio::io::stdin(), tokio::io::stdout()).await.context("demo server over stdio")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::each_cause_once;

    #[derive(Debug, thiserror::Error)]
    #[error("ledger: {0}")]
    struct Quoting(#[source] std::io::Error);

    #[test]
    fn a_cause_its_parent_already_quotes_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let error = anyhow::Error::new(Quoting(io)).context("cannot open the ledger");
        assert_eq!(each_cause_once(&error), "cannot open the ledger: ledger: connection refused");
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(each_cause_once(&plain), "outer: inner", "a cause not yet said is kept");
    }
}
