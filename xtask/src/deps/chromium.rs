//! Headless Chromium from Debian's packages, for the status page's browser test
//! (`crates/tierlog/tests/serve/page.rs`, which runs `chromium --headless --dump-dom`).

use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd;

/// `chromium` on `PATH`, installed with apt when missing.
pub(super) fn ensure() -> Result<String> {
    if let Some(found) = installed() {
        return Ok(found);
    }
    if !(super::valkey::is_root() && cmd::find_on_path("apt-get").is_some()) {
        bail!(
            "chromium is not on PATH, and this is not a root shell with apt-get, so it cannot be \
             installed here. Run: sudo apt-get update && sudo apt-get install -y chromium"
        );
    }
    println!("deps: chromium missing, installing it with apt-get");
    let apt =
        |args: &[&str]| cmd::run(Command::new("apt-get").env("DEBIAN_FRONTEND", "noninteractive").args(args));
    if let Err(e) = apt(&["update"]) {
        println!("deps: warning: {e:#}; trying to install from the package lists already present");
    }
    apt(&["install", "-y", "chromium"])?;
    let found = installed().context("apt-get succeeded but chromium is not on PATH")?;
    Ok(format!("installed {found}"))
}

/// `Chromium 120.0… present (/usr/bin/chromium)`.
fn installed() -> Option<String> {
    let path = cmd::find_on_path("chromium")?;
    let version = cmd::first_line_of(Command::new(&path).arg("--version"))
        .unwrap_or_else(|| "(unknown version)".into());
    Some(format!("{version} present ({})", path.display()))
}
