//! `tierlog config`: the effective configuration as TOML — the store's tables, `[server]`
//! and `[client]` — secrets (passwords, keys, tokens) redacted.

use crate::cmd::Ctx;
use crate::config::{Origin, to_redacted_toml};
use crate::exit;

/// Prints the configuration with a comment naming its origin.
pub(crate) fn run(ctx: &Ctx) -> anyhow::Result<u8> {
    let origin = match &ctx.loaded.origin {
        Origin::Embedded => "embedded defaults".to_owned(),
        Origin::File(p) => p.display().to_string(),
    };
    println!("# effective configuration (from {origin}, with environment and command-line overrides)");
    let loaded = &ctx.loaded;
    print!("{}", to_redacted_toml(&loaded.config, &loaded.server, &loaded.client)?);
    Ok(exit::OK)
}
