//! The feature matrix: `cargo check` builds of feature combinations that the normal
//! workspace build (all default features) never compiles.
//!
//! Every workspace crate that declares features gets a `--no-default-features` build
//! automatically (found with `cargo metadata`); [`EXTRA_BUILDS`] adds the combinations
//! that matter beyond that, e.g. each tier subset of tier-router.

use std::process::Command;

use crate::cmd;

use anyhow::{Context, Result};

/// A `cargo check -p <package> <args…>` build of the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FeatureBuild {
    /// The package to check.
    pub(crate) package: String,
    /// Feature arguments, e.g. `--no-default-features --features warm`.
    pub(crate) args: Vec<String>,
}

impl FeatureBuild {
    fn new(package: &str, args: &[&str]) -> Self {
        Self { package: package.to_owned(), args: args.iter().map(|a| (*a).to_owned()).collect() }
    }

    /// `tier-router --no-default-features --features warm`.
    pub(crate) fn label(&self) -> String {
        std::iter::once(self.package.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The `cargo check` command for this build.
    pub(crate) fn command(&self) -> Command {
        let mut cargo = cmd::cargo();
        cargo.args(["check", "--quiet", "-p", &self.package]).args(&self.args);
        cargo
    }
}

/// Combinations checked in addition to the automatic `--no-default-features` builds:
/// `(package, feature arguments)`. tier-router's four deployments are hot only (the
/// automatic `--no-default-features` build, which links neither fred nor object_store),
/// hot+warm and hot+cold (below) and hot+warm+cold (the default features).
const EXTRA_BUILDS: &[(&str, &[&str])] = &[
    ("tier-router", &["--no-default-features", "--features", "warm"]),
    ("tier-router", &["--no-default-features", "--features", "cold"]),
];

/// Every build of the matrix: `--no-default-features` for each workspace crate with
/// features, then [`EXTRA_BUILDS`], without duplicates.
pub(crate) fn builds() -> Result<Vec<FeatureBuild>> {
    let out = cmd::cargo()
        .args(["metadata", "--format-version", "1", "--no-deps", "--quiet"])
        .output()
        .context("could not run `cargo metadata`")?;
    if !out.status.success() {
        anyhow::bail!("`cargo metadata` failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("`cargo metadata` printed something that is not JSON")?;
    let mut builds = crates_with_features(&metadata)
        .into_iter()
        .map(|package| FeatureBuild::new(&package, &["--no-default-features"]))
        .collect::<Vec<_>>();
    for (package, args) in EXTRA_BUILDS {
        let build = FeatureBuild::new(package, args);
        if !builds.contains(&build) {
            builds.push(build);
        }
    }
    Ok(builds)
}

/// Names of the packages in `cargo metadata --no-deps` output that declare any feature,
/// sorted.
fn crates_with_features(metadata: &serde_json::Value) -> Vec<String> {
    let packages = metadata.get("packages").and_then(|p| p.as_array()).map(Vec::as_slice).unwrap_or_default();
    let mut names: Vec<String> = packages
        .iter()
        .filter(|p| p.get("features").and_then(|f| f.as_object()).is_some_and(|f| !f.is_empty()))
        .filter_map(|p| p.get("name").and_then(|n| n.as_str()).map(str::to_owned))
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_crates_declaring_features_get_a_build() {
        let metadata = serde_json::json!({
            "packages": [
                { "name": "tier-warm", "features": { "default": ["tls"], "tls": [] } },
                { "name": "tier-core", "features": {} },
                { "name": "tier-cold", "features": { "aws": [] } },
            ]
        });
        assert_eq!(crates_with_features(&metadata), ["tier-cold", "tier-warm"]);
        assert!(crates_with_features(&serde_json::json!({})).is_empty());
    }

    #[test]
    fn a_build_reads_as_its_command_line() {
        let build = FeatureBuild::new("tier-router", &["--no-default-features", "--features", "warm"]);
        assert_eq!(build.label(), "tier-router --no-default-features --features warm");
        assert_eq!(
            crate::cmd::display(&build.command()),
            "cargo check --quiet -p tier-router --no-default-features --features warm"
        );
    }
}
