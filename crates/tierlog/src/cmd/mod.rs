//! The subcommands, one module each, and what they share.

mod config;
pub(crate) mod consume;
mod demo;
pub(crate) mod export;
mod inspect;
pub(crate) mod produce;
mod recover;
pub(crate) mod remote;
pub(crate) mod serve;
mod served;
mod status;
mod verify;

pub(crate) use inspect::no_such_topic;
use tier_router::StoreConfig;

use crate::cli::{Cli, Command};
use crate::config::{Loaded, load};
use crate::progress::Progress;

/// What every command gets: the effective configuration and the progress setting.
#[derive(Debug)]
pub(crate) struct Ctx {
    /// The loaded configuration.
    pub(crate) loaded: Loaded,
    /// Progress bars.
    pub(crate) progress: Progress,
}

impl Ctx {
    /// The store configuration.
    pub(crate) fn config(&self) -> &StoreConfig {
        &self.loaded.config
    }
}

/// Loads the configuration, starts the metrics endpoint if asked, and runs the command.
/// Returns the exit code.
pub(crate) async fn run(cli: Cli) -> anyhow::Result<u8> {
    let loaded = load(cli.global.config.as_deref(), cli.global.data_dir.as_deref(), std::env::vars())?;
    if let Some(addr) = cli.global.metrics_addr {
        crate::metrics::serve(addr).await?;
    }
    let ctx = Ctx { loaded, progress: Progress::new(!cli.global.no_progress) };
    if let Some(client) = remote::client(&cli.global, &cli.command, &ctx.loaded.client)? {
        match &cli.command {
            Command::Produce(args) => return remote::produce(&ctx, &client, args).await,
            Command::Consume(args) => return remote::consume(&ctx, &client, args).await,
            Command::Status(args) => return remote::status(&client, args).await,
            Command::Export(args) => return remote::export(&client, args).await,
            Command::Verify(args) => return remote::verify(&client, args).await,
            Command::Recover(args) => return remote::recover(&client, args).await,
            _ => {}
        }
    }
    match cli.command {
        Command::Demo(args) => demo::run(&ctx, args).await,
        Command::Produce(args) => produce::run(&ctx, args).await,
        Command::Consume(args) => consume::run(&ctx, args).await,
        Command::Status(args) => status::run(&ctx, args).await,
        Command::Export(args) => export::run(&ctx, args, export::Mode::Export).await,
        Command::Maintain(args) => export::run(&ctx, args, export::Mode::Maintain).await,
        Command::Verify(args) => verify::run(&ctx, args).await,
        Command::Recover(args) => recover::run(&ctx, args).await,
        Command::Config => config::run(&ctx),
        Command::Serve(args) => serve::run(&ctx, args).await,
    }
}
