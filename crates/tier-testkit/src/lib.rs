//! Test support for tierlog tiers.
