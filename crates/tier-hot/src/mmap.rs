//! The one `unsafe` call of the crate: mapping a sealed segment file into memory.

use std::{fs::File, io};

use bytes::Bytes;

/// Maps the whole of `file` read-only and hands the mapping over as [`Bytes`].
#[allow(unsafe_code)]
pub(crate) fn map_sealed(file: &File) -> io::Result<Bytes> {
    // SAFETY: `Mmap::map` is unsafe because the mapped file could change underneath the
    // mapping. We only map sealed segments, which this crate never writes, truncates or
    // renames again: they are immutable once sealed. Retention removes them with
    // `unlink`, which on Linux keeps the inode (and so the mapping) valid until the
    // last mapping is dropped.
    let map = unsafe { memmap2::Mmap::map(file)? };
    Ok(Bytes::from_owner(map))
}
