//! Valkey (or Redis, its wire-compatible fallback) from Debian's packages.
//!
//! Debian bookworm has `valkey-server` (8.x) only in bookworm-backports, so that suite is
//! added to apt's sources when no configured source names it yet.

use std::{fs, path::Path, process::Command};

use anyhow::{Context, Result, bail};

use crate::cmd;

const SOURCES_DIR: &str = "/etc/apt/sources.list.d";
const SOURCES_LIST: &str = "/etc/apt/sources.list";
const OS_RELEASE: &str = "/etc/os-release";

/// A Valkey or Redis server on `PATH`, installed with apt when neither is there.
pub(super) fn ensure() -> Result<String> {
    if let Some(found) = installed() {
        return Ok(found);
    }
    let os = OsRelease::read();
    let backports = os.backports_suite();
    if !(is_root() && cmd::find_on_path("apt-get").is_some()) {
        bail!(
            "neither valkey-server nor redis-server is on PATH, and this is not a root shell with \
             apt-get, so it cannot be installed here. Run:\n{}",
            manual_commands(&backports)
        );
    }
    println!("deps: no valkey-server or redis-server on PATH; installing with apt-get");
    let apt =
        |args: &[&str]| cmd::run(Command::new("apt-get").env("DEBIAN_FRONTEND", "noninteractive").args(args));
    if let Some(suite) = &backports
        && !any_source_names(suite)?
    {
        let path = Path::new(SOURCES_DIR).join(format!("{suite}.sources"));
        println!("deps: adding {suite} to apt sources: {}", path.display());
        fs::write(&path, deb822_source(suite)).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Err(e) = apt(&["update"]) {
        println!("deps: warning: {e:#}; trying to install from the package lists already present");
    }
    let from_backports = match &backports {
        Some(suite) => apt(&["install", "-y", "-t", suite, "valkey-server"]),
        None => apt(&["install", "-y", "valkey-server"]),
    };
    if let Err(e) = from_backports {
        println!("deps: valkey-server could not be installed ({e:#}); falling back to redis-server");
        apt(&["install", "-y", "redis-server"])?;
    }
    let found =
        installed().context("apt-get succeeded but neither valkey-server nor redis-server is on PATH")?;
    Ok(format!("installed {found}"))
}

/// `valkey-server 8.0.1 (/usr/bin/valkey-server)` for the first server binary on `PATH`.
fn installed() -> Option<String> {
    ["valkey-server", "redis-server"].into_iter().find_map(|name| {
        let path = cmd::find_on_path(name)?;
        let version = cmd::first_line_of(Command::new(&path).arg("--version"))
            .and_then(|line| version_from_banner(&line))
            .unwrap_or_else(|| "(unknown version)".into());
        Some(format!("{name} {version} present ({})", path.display()))
    })
}

/// The `v=` field of `valkey-server --version` ("Valkey server v=8.0.1 sha=…").
fn version_from_banner(line: &str) -> Option<String> {
    line.split_whitespace().find_map(|w| w.strip_prefix("v=")).map(str::to_owned)
}

/// True when this process runs as root (`id -u` prints 0).
pub(super) fn is_root() -> bool {
    cmd::first_line_of(Command::new("id").arg("-u")).is_some_and(|uid| uid == "0")
}

/// Whether any configured apt source (one-line `.list` or deb822 `.sources`) names `suite`.
fn any_source_names(suite: &str) -> Result<bool> {
    let mut files = vec![Path::new(SOURCES_LIST).to_path_buf()];
    if let Ok(entries) = fs::read_dir(SOURCES_DIR) {
        for entry in entries {
            let path = entry.with_context(|| format!("listing {SOURCES_DIR}"))?.path();
            let active = path.extension().is_some_and(|ext| ext == "list" || ext == "sources");
            if active {
                files.push(path);
            }
        }
    }
    Ok(files.iter().filter_map(|f| fs::read_to_string(f).ok()).any(|text| text_names_suite(&text, suite)))
}

/// True when a non-comment line of an apt source file has `suite` as a whole word.
fn text_names_suite(text: &str, suite: &str) -> bool {
    text.lines()
        .map(|line| line.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .any(|word| word == suite)
}

/// A deb822 source for Debian's `suite` (e.g. `bookworm-backports`).
fn deb822_source(suite: &str) -> String {
    format!(
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: {suite}\nComponents: main\n\
         Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
}

/// What a user with root runs to install Valkey by hand.
fn manual_commands(backports: &Option<String>) -> String {
    match backports {
        Some(suite) => format!(
            "  sudo tee /etc/apt/sources.list.d/{suite}.sources <<'EOF'\n{}EOF\n  \
             sudo apt-get update\n  sudo apt-get install -y -t {suite} valkey-server\n  \
             (or, for the Redis 7 fallback: sudo apt-get install -y redis-server)\n\
             or point $TIERLOG_VALKEY_SERVER at a valkey-server/redis-server binary.",
            deb822_source(suite)
        ),
        None => "  sudo apt-get install -y valkey-server   (or: redis-server)\n\
                 or point $TIERLOG_VALKEY_SERVER at a valkey-server/redis-server binary."
            .to_owned(),
    }
}

/// The fields of `/etc/os-release` that decide the backports suite.
#[derive(Debug, Default)]
struct OsRelease {
    id: String,
    codename: String,
}

impl OsRelease {
    fn read() -> Self {
        fs::read_to_string(OS_RELEASE).map(|text| Self::parse(&text)).unwrap_or_default()
    }

    fn parse(text: &str) -> Self {
        let mut os = Self::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else { continue };
            let value = value.trim().trim_matches('"').to_owned();
            match key.trim() {
                "ID" => os.id = value,
                "VERSION_CODENAME" => os.codename = value,
                _ => {}
            }
        }
        os
    }

    /// `<codename>-backports` on Debian; `None` elsewhere (no Debian suite to add).
    fn backports_suite(&self) -> Option<String> {
        (self.id == "debian" && !self.codename.is_empty()).then(|| format!("{}-backports", self.codename))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_suite_in_deb822_and_one_line_sources_but_not_in_comments() {
        let deb822 = "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-backports\n";
        assert!(text_names_suite(deb822, "bookworm-backports"));
        let one_line = "deb http://deb.debian.org/debian bookworm-backports main\n";
        assert!(text_names_suite(one_line, "bookworm-backports"));
        let commented = "# deb http://deb.debian.org/debian bookworm-backports main\n\
                         deb http://deb.debian.org/debian bookworm main # bookworm-backports\n";
        assert!(!text_names_suite(commented, "bookworm-backports"));
        let other = "Suites: bookworm bookworm-updates bookworm-backports-sloppy\n";
        assert!(!text_names_suite(other, "bookworm-backports"));
    }

    #[test]
    fn backports_suite_only_on_debian() {
        let debian = OsRelease::parse(
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_CODENAME=bookworm\n",
        );
        assert_eq!(debian.backports_suite().as_deref(), Some("bookworm-backports"));
        let ubuntu = OsRelease::parse("ID=ubuntu\nVERSION_CODENAME=noble\n");
        assert_eq!(ubuntu.backports_suite(), None);
    }

    #[test]
    fn deb822_source_is_the_documented_stanza() {
        assert_eq!(
            deb822_source("bookworm-backports"),
            "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\n\
             Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        );
    }

    #[test]
    fn version_comes_from_the_v_field() {
        let banner = "Valkey server v=8.0.1 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64";
        assert_eq!(version_from_banner(banner).as_deref(), Some("8.0.1"));
        assert_eq!(version_from_banner("garbage"), None);
    }

    #[test]
    fn manual_commands_name_the_suite_and_the_fallback() {
        let text = manual_commands(&Some("bookworm-backports".into()));
        assert!(text.contains("apt-get install -y -t bookworm-backports valkey-server"), "{text}");
        assert!(text.contains("apt-get install -y redis-server"), "{text}");
        assert!(text.contains("Suites: bookworm-backports"), "{text}");
    }
}
