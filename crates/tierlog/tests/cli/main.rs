//! End-to-end tests of the `tierlog` binary: each runs it with std::process in a fresh
//! temporary working directory (so the embedded defaults put data under it).

mod bad_input;
mod compound;
mod full_disk;
mod metrics;
mod no_topic;
mod produce;
mod readonly;
mod roundtrip;
mod servers;
mod support;
mod verify;
