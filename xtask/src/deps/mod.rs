//! `cargo xtask deps`: installs what tests and lints need, only when it is missing.
//!
//! Each check is cheap, so a run where everything is present takes well under a second.

mod advisory;
mod chromium;
mod valkey;

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::cmd;

/// Environment variable naming a `moto_server` to use instead of `target/venv` (shared with
/// tier-testkit's harness).
const ENV_MOTO_SERVER: &str = "TIERLOG_MOTO_SERVER";

/// Ensures every dependency is present, installing what is missing. Returns one line per
/// dependency saying what is there (or what was installed).
pub(crate) fn ensure_all(root: &Path) -> Result<Vec<String>> {
    Ok(vec![
        valkey::ensure().context("Valkey")?,
        ensure_disk_tools().context("disk tools")?,
        ensure_moto(root).context("moto")?,
        chromium::ensure().context("chromium")?,
        ensure_cargo_deny().context("cargo-deny")?,
        advisory::ensure(root).context("advisory DB")?,
    ])
}

/// The tools `tier_testkit::loopfs` builds a real ext4 file system on a loop device with
/// (`mkfs.ext4`, `dumpe2fs` from e2fsprogs; `losetup`, `fallocate`, `mount` from
/// util-linux and mount), installed with apt when one is missing and this is a root shell.
fn ensure_disk_tools() -> Result<String> {
    const TOOLS: [(&str, &str); 5] = [
        ("mkfs.ext4", "e2fsprogs"),
        ("dumpe2fs", "e2fsprogs"),
        ("losetup", "mount"),
        ("mount", "mount"),
        ("fallocate", "util-linux"),
    ];
    let missing: Vec<&str> = TOOLS
        .iter()
        .filter(|(tool, _)| cmd::find_on_path(tool).is_none())
        .map(|(_, package)| *package)
        .collect();
    if missing.is_empty() {
        return Ok("mkfs.ext4, dumpe2fs, losetup, mount, fallocate present".into());
    }
    if !(valkey::is_root() && cmd::find_on_path("apt-get").is_some()) {
        bail!(
            "missing {missing:?} (needed by the real-disk tests), and this is not a root shell with apt-get"
        );
    }
    let mut packages = missing;
    packages.sort_unstable();
    packages.dedup();
    println!("deps: installing {packages:?} with apt-get (real-disk tests)");
    let mut args = vec!["install", "-y"];
    args.extend(packages.iter().copied());
    cmd::run(Command::new("apt-get").env("DEBIAN_FRONTEND", "noninteractive").args(&args))?;
    Ok(format!("installed {packages:?}"))
}

/// The virtualenv holding `moto_server`, as tier-testkit's harness expects it.
fn venv_dir(root: &Path) -> PathBuf {
    root.join("target").join("venv")
}

/// moto (the S3 server used by tests) in `target/venv`, unless `$TIERLOG_MOTO_SERVER`
/// names one that exists.
fn ensure_moto(root: &Path) -> Result<String> {
    if let Some(path) = env::var_os(ENV_MOTO_SERVER).map(PathBuf::from) {
        if cmd::is_executable(&path) {
            return Ok(format!("moto_server from ${ENV_MOTO_SERVER}: {}", path.display()));
        }
        bail!("${ENV_MOTO_SERVER}={} is not an executable file", path.display());
    }
    let venv = venv_dir(root);
    let moto = venv.join("bin").join("moto_server");
    if cmd::is_executable(&moto) {
        return Ok(format!("moto_server present: {}", moto.display()));
    }
    println!("deps: moto_server missing, installing moto[server] into {}", venv.display());
    if !cmd::is_executable(&venv.join("bin").join("pip")) {
        create_venv(&venv)?;
    }
    cmd::run(Command::new(venv.join("bin").join("pip")).args([
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "moto[server]",
    ]))?;
    if !cmd::is_executable(&moto) {
        bail!("pip installed moto[server] but {} does not exist", moto.display());
    }
    Ok(format!("installed moto[server]: {}", moto.display()))
}

/// `python3 -m venv <dir>`; on Debian that needs the `python3-venv` package, which is
/// installed (as root, with apt) when the first attempt fails.
fn create_venv(venv: &Path) -> Result<()> {
    let Some(python) = cmd::find_on_path("python3") else {
        bail!("python3 is not on PATH: install Python 3 (Debian: apt-get install -y python3 python3-venv)");
    };
    let mut make_venv = Command::new(&python);
    make_venv.args(["-m", "venv"]).arg(venv);
    if cmd::run(&mut make_venv).is_ok() {
        return Ok(());
    }
    if !(valkey::is_root() && cmd::find_on_path("apt-get").is_some()) {
        bail!("`python3 -m venv` failed: install the venv module (Debian: apt-get install -y python3-venv)");
    }
    println!("deps: `python3 -m venv` failed; installing python3-venv");
    cmd::run(Command::new("apt-get").env("DEBIAN_FRONTEND", "noninteractive").args([
        "install",
        "-y",
        "python3-venv",
    ]))?;
    cmd::run(&mut make_venv)
}

/// cargo-deny, installed from crates.io when `cargo deny --version` fails.
fn ensure_cargo_deny() -> Result<String> {
    let version = || cmd::first_line_of(cmd::cargo().args(["deny", "--version"]));
    if let Some(v) = version() {
        return Ok(format!("{v} present"));
    }
    println!("deps: cargo-deny missing, installing it (this compiles it: several minutes)");
    cmd::run(cmd::cargo().args(["install", "cargo-deny", "--locked"]))?;
    let v = version().context("`cargo install cargo-deny` succeeded but `cargo deny --version` fails")?;
    Ok(format!("installed {v}"))
}
