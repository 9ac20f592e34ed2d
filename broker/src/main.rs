use std::io::IsTerminal;

use clap::Parser;
use skein_broker::{BrokerConfig, Cli};
use tracing_subscriber::EnvFilter;

fn main() {
    let cli = Cli::parse();
    let base = std::env::var("SKEIN_LOG")
        .ok()
        .filter(|d| EnvFilter::try_new(d).is_ok())
        .unwrap_or_else(|| "info".into());
    let filter = EnvFilter::new(&base);
    // Colour only on a terminal: a log file or a container log must not carry escape codes.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    // The filter can be replaced at run time (BROKER_LOGGER configs, `log_levels`).
    fn reloader<F, S>(
        handle: tracing_subscriber::reload::Handle<F, S>,
    ) -> skein_broker::log_levels::Reload
    where
        F: From<EnvFilter> + 'static + Send + Sync,
        S: 'static + Send + Sync,
    {
        Box::new(move |d: &str| {
            let f = EnvFilter::try_new(d).map_err(|e| e.to_string())?;
            handle.reload(F::from(f)).map_err(|e| e.to_string())
        })
    }
    if cli.log_format == "json" {
        let b = tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_filter_reloading();
        skein_broker::log_levels::install(&base, reloader(b.reload_handle()));
        b.init();
    } else {
        let b = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .with_filter_reloading();
        skein_broker::log_levels::install(&base, reloader(b.reload_handle()));
        b.init();
    }
    let mut config = match BrokerConfig::from_cli(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skein-broker: {e}");
            std::process::exit(2);
        }
    };
    let nofile = skein_broker::system::raise_open_files_limit();
    let log_files = skein_broker::system::log_open_files_limit(nofile);
    skein_storage::open_files::set_limit(log_files);
    if config.connection_limits.max_connections_unset {
        config.connection_limits.max_connections =
            Some(skein_broker::system::default_max_connections(nofile));
    }
    let max_connections = config.connection_limits.max_connections;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
        tracing::info!(
            node_id = config.node_id,
            data_dir = %config.data_dir.display(),
            listen = %config.listen,
            advertised = %format!("{}:{}", config.advertised_host, config.advertised_port),
            open_files_limit = nofile.unwrap_or(0),
            log_files_open_at_most = log_files,
            max_connections = max_connections.map_or(-1, i64::from),
            "starting skein-broker"
        );
        skein_broker::run_until(config, listener, shutdown_signal()).await
    });
    // The logs are closed by now. A blocking call still waiting for a
    // controller session (a heartbeat's re-registration, say) must not keep
    // the process alive: the runtime waits at most this long for it.
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    if let Err(e) = result {
        eprintln!("skein-broker: {e:#}");
        std::process::exit(1);
    }
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
