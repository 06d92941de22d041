//! `tierlog config`: the effective configuration as TOML, secrets redacted.

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
    print!("{}", to_redacted_toml(ctx.config())?);
    Ok(exit::OK)
}
