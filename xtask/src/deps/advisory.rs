//! The RustSec advisory database for `cargo deny --offline check advisories`.
//!
//! There is no network to fetch it, so a snapshot sits beside the repository in
//! `../shared/advisory-db/<name>/` (read-only, not a git repository). cargo-deny reads a
//! database only from a git repository with a commit (it asks git for HEAD's timestamp), at
//! `<db-path>/<name>` where `db-path` is set in `deny.toml` to `target/advisory-dbs`
//! (relative to the directory cargo-deny runs in: the workspace root) and `<name>` is derived
//! from the database URL: `advisory-db-3157b0e258782691` for the default RustSec URL, which is
//! the snapshot's directory name. So the snapshot is copied there, `git init`ed and committed
//! once; later runs find the commit and do nothing.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::cmd;

/// Where `deny.toml`'s `db-path` points, relative to the workspace root.
const DB_PATH: &str = "target/advisory-dbs";

/// Copies the snapshot into `target/advisory-dbs/` as a one-commit git repository, unless
/// that is already done.
pub(super) fn ensure(root: &Path) -> Result<String> {
    let snapshots = root.join("..").join("shared").join("advisory-db");
    let snapshots = snapshots.canonicalize().unwrap_or(snapshots);
    let source = single_subdirectory(&snapshots)?;
    let name = source.file_name().context("snapshot directory has no name")?.to_owned();
    let db_path = root.join(DB_PATH);
    let dest = db_path.join(&name);
    if has_commit(&dest) {
        return Ok(format!("advisory DB present: {}", dest.display()));
    }
    println!("deps: installing the advisory DB snapshot {} into {}", source.display(), dest.display());
    let mut partial_name = name.clone();
    partial_name.push(".partial");
    let partial = db_path.join(partial_name);
    for stale in [&partial, &dest] {
        if stale.exists() {
            fs::remove_dir_all(stale).with_context(|| format!("removing incomplete {}", stale.display()))?;
        }
    }
    copy_tree(&source, &partial)?;
    let git = |args: &[&str]| {
        let mut git = Command::new("git");
        git.arg("-C").arg(&partial).args([
            "-c",
            "user.name=tierlog xtask",
            "-c",
            "user.email=xtask@tierlog.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "core.hooksPath=/dev/null",
        ]);
        git.args(args);
        git.stdout(std::process::Stdio::null());
        cmd::run(&mut git)
    };
    git(&["init", "--quiet"])?;
    git(&["add", "--all"])?;
    git(&["commit", "--quiet", "--no-verify", "-m", "advisory-db snapshot"])?;
    fs::rename(&partial, &dest)
        .with_context(|| format!("renaming {} to {}", partial.display(), dest.display()))?;
    Ok(format!("installed advisory DB: {}", dest.display()))
}

/// The one directory inside `dir` (the snapshot holds exactly one database).
fn single_subdirectory(dir: &Path) -> Result<PathBuf> {
    let entries = fs::read_dir(dir)
        .with_context(|| format!("the advisory DB snapshot {} cannot be read", dir.display()))?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            dirs.push(entry.path());
        }
    }
    match <[PathBuf; 1]>::try_from(dirs) {
        Ok([one]) => Ok(one),
        Err(dirs) => {
            bail!("expected exactly one database directory in {}, found {}", dir.display(), dirs.len())
        }
    }
}

/// True when `dir` is a git repository whose HEAD is a commit.
fn has_commit(dir: &Path) -> bool {
    dir.join(".git").is_dir()
        && cmd::succeeds_quietly(Command::new("git").arg("-C").arg(dir).args([
            "rev-parse",
            "--verify",
            "-q",
            "HEAD",
        ]))
}

/// Copies the directory tree `from` to `to` (which must not exist). Directories are created
/// writable whatever the source's mode, since the snapshot is read-only.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in fs::read_dir(from).with_context(|| format!("listing {}", from.display()))? {
        let entry = entry.with_context(|| format!("listing {}", from.display()))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().with_context(|| format!("reading the type of {}", src.display()))?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            fs::copy(&src, &dst)
                .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-advisory-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn copies_a_read_only_tree_and_commits_it_once() {
        use std::os::unix::fs::PermissionsExt;
        let base = scratch("commit");
        let root = base.join("main");
        let db = base.join("shared/advisory-db/advisory-db-0123456789abcdef");
        fs::create_dir_all(db.join("crates/foo")).expect("mkdir");
        fs::write(db.join("crates/foo/RUSTSEC-2000-0001.md"), "advisory").expect("write");
        fs::write(db.join(".hidden"), "x").expect("write");
        for dir in [db.join("crates/foo"), db.join("crates"), db.clone()] {
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o555)).expect("chmod");
        }
        fs::create_dir_all(&root).expect("mkdir");

        let first = ensure(&root).expect("first install");
        assert!(first.starts_with("installed"), "{first}");
        let dest = root.join("target/advisory-dbs/advisory-db-0123456789abcdef");
        assert_eq!(
            fs::read_to_string(dest.join("crates/foo/RUSTSEC-2000-0001.md")).expect("copied"),
            "advisory"
        );
        assert!(dest.join(".hidden").is_file());
        assert!(has_commit(&dest));
        let second = ensure(&root).expect("second run");
        assert!(second.starts_with("advisory DB present"), "{second}");

        for dir in [db.clone(), db.join("crates"), db.join("crates/foo")] {
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        fs::remove_dir_all(&base).expect("cleanup");
    }

    #[test]
    fn refuses_an_ambiguous_snapshot() {
        let base = scratch("ambiguous");
        fs::create_dir_all(base.join("a")).expect("mkdir");
        fs::create_dir_all(base.join("b")).expect("mkdir");
        let err = single_subdirectory(&base).expect_err("two databases");
        assert!(err.to_string().contains("found 2"), "{err}");
        fs::remove_dir_all(&base).expect("cleanup");
    }
}
