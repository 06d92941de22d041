//! Reading a segment file as the disk holds it, not as the page cache remembers it.
//!
//! On Linux a failed writeback marks the dirty pages it could not write *clean*: the page
//! cache keeps showing the bytes, and a later `fsync` — on the same descriptor or a new
//! one, in this process or the next — returns success without writing them
//! ("fsyncgate": Rebello et al., "Can Applications Recover from fsync Failures?",
//! USENIX ATC 2020; the PostgreSQL thread "PostgreSQL's handling of fsync() errors is
//! unsafe and risks data loss at least on XFS", 2018). A WAL that reopens after a failed
//! fsync and reads its last file through the page cache would serve, and vouch for,
//! records the disk does not hold; a power cut or the page's eviction later turns them
//! into zeros.
//!
//! So before recovery scans a file that is not known to be durable (the last file of a
//! topic, and a sealed file whose seal it finds cut short), [`read_from_disk_next`]
//! fsyncs it and then drops its pages from the page cache, and the scan reads what the
//! device really holds. See "Failed fsyncs" in `docs/hot.md`.

use std::{fs::File, path::Path};

use tier_core::{TierError, TopicName};

use crate::layout::io_err;

/// Makes the next read of the segment file `path` show what the disk holds:
///
/// 1. `fdatasync`: dirty pages (a previous process's unsynced writes) are written, and a
///    writeback error no descriptor has reported yet is reported now. A failure is
///    `Unavailable` and the file is not trusted (the topic is kept aside as damaged).
/// 2. `posix_fadvise(POSIX_FADV_DONTNEED)` over the whole file: every page is clean after
///    step 1, so every page is dropped — among them those a failed writeback marked clean
///    without writing them — and the next read goes to the device.
///
/// Call it before the file is mapped: the kernel keeps pages that are mapped. On tmpfs
/// the pages are the storage and are never dropped (nor ever fail a writeback); on a
/// system without `posix_fadvise` (not Linux) only step 1 runs.
pub(crate) fn read_from_disk_next(topic: &TopicName, path: &Path) -> Result<(), TierError> {
    if reverted!(path, TrustFailedFsyncs) {
        return Ok(());
    }
    let io = |what| move |e| io_err(topic, path, what, e);
    let file = File::open(path).map_err(io("opening a segment to check what the disk holds"))?;
    file.sync_data().map_err(io("fsyncing a segment before recovery reads it"))?;
    drop_pages(&file)
        .and_then(|()| page_cache_dropped!(path))
        .map_err(io("dropping a segment's cached pages before recovery reads it"))?;
    synced!(path, &file);
    Ok(())
}

#[cfg(target_os = "linux")]
fn drop_pages(file: &File) -> std::io::Result<()> {
    rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed).map_err(std::io::Error::from)
}

#[cfg(not(target_os = "linux"))]
fn drop_pages(_file: &File) -> std::io::Result<()> {
    Ok(())
}
