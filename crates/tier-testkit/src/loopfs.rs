//! A real ext4 file system whose disk can fill up: the store runs on it so that writes
//! and fsyncs fail the way the kernel makes them fail, not the way a fault hook does.
//!
//! [`LoopFs::mount`] mounts a small `tmpfs` (the *backing store*), creates a sparse disk
//! image file on it, formats it as ext4 and mounts it through a loop device. Every block
//! `mkfs` uses (metadata, the journal) is then written out so that it is a real page of
//! the tmpfs, while the free blocks stay holes: every data block ext4 allocates later
//! needs a new page, and the journal never does (a journal that cannot write aborts and
//! turns the file system read-only, a different failure).
//! [`LoopFs::fill`] then fills the tmpfs with a filler file: from that moment writeback of
//! new data blocks fails (`ENOSPC` from the loop device, reported by the next `fsync` of
//! the file, or by `write` itself) while the journal keeps working, exactly the
//! situation in which Linux marks the failed dirty pages clean and a later `fsync`
//! succeeds without writing them (*Can Applications Recover from fsync Failures?*,
//! USENIX ATC 2020).
//!
//! The loop device takes requests of one block (4 KiB) only. Linux's loop driver (seen
//! on 6.18) writes a request to the backing file in one call and completes a WRITE that
//! the backing file took only in part (a short write: the tmpfs stored the request's
//! first blocks, then ran out of space) as a *success* (`lo_complete_rq` in
//! `drivers/block/loop.c` fails a WRITE only on a negative result): ext4 then marks the
//! blocks written and `fsync` returns success while the disk holds zeros there — a disk
//! that acknowledges writes it did not store, not a full one. A request that starts
//! at a block the store already holds (the rewritten last page of a file) and runs into
//! new blocks is exactly that request. With one block per request, every write of a
//! block the full store cannot allocate fails with `ENOSPC`, as a full disk's would.
//! [`LoopFs::free`] removes the filler; [`LoopFs::remount`] unmounts
//! and mounts the image again, dropping the page cache, so what is read afterwards is what
//! the disk holds.
//!
//! Needs root, `mount`, `losetup`, `mkfs.ext4`, `dumpe2fs` and `fallocate`
//! (util-linux, e2fsprogs) and a kernel that allows loop devices. Where any of these is
//! refused, [`LoopFs::mount`] returns [`Unsupported`] with the reason, and the caller
//! says loudly that it skipped ([`LoopFs::mount_or_explain`]).

use std::{
    fs,
    io::{self, Write},
    path::{Path, PathBuf},
    process::Command,
};

/// Why a loop-device file system cannot be had here (not root, no loop devices, a
/// command missing or refused).
#[derive(Debug)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Sizes of a [`LoopFs`].
#[derive(Clone, Copy, Debug)]
pub struct LoopFsSize {
    /// The tmpfs that holds the disk image (MiB): what the disk can really store.
    pub backing_mib: u64,
    /// The ext4 file system's size (MiB): what it believes it can store.
    pub image_mib: u64,
}

impl Default for LoopFsSize {
    fn default() -> Self {
        Self { backing_mib: 48, image_mib: 64 }
    }
}

/// An ext4 file system on a loop device over a tmpfs that can be filled; unmounted,
/// detached and removed on drop.
#[derive(Debug)]
pub struct LoopFs {
    root: tempfile::TempDir,
    mnt: PathBuf,
    device: Option<String>,
    mounted: bool,
    backing_mounted: bool,
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let shown = format!("{cmd:?}");
    match cmd.output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => Err(format!(
            "{shown} exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("{shown} could not run: {e}")),
    }
}

/// The free block ranges (inclusive) `dumpe2fs` lists for an image, and its block size.
fn free_blocks(image: &Path) -> Result<(u64, Vec<(u64, u64)>), String> {
    let text = run(Command::new("dumpe2fs").arg(image).stderr(std::process::Stdio::null()))?;
    let mut block = None;
    let mut ranges = Vec::new();
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("Block size:") {
            block = v.trim().parse::<u64>().ok();
        }
        // A group's list is indented ("  Free blocks: 2065-16383"); the header's
        // unindented "Free blocks:" line is a count.
        if let Some(list) = line.strip_prefix("  Free blocks:") {
            for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (a, b) = part.split_once('-').unwrap_or((part, part));
                let (Ok(a), Ok(b)) = (a.trim().parse(), b.trim().parse()) else {
                    return Err(format!("dumpe2fs printed a free-block range it cannot parse: {part:?}"));
                };
                ranges.push((a, b));
            }
        }
    }
    let block = block.ok_or_else(|| "dumpe2fs printed no block size".to_owned())?;
    ranges.sort_unstable();
    Ok((block, ranges))
}

/// Makes every block of `image` outside `free` a real page of the backing store, by
/// writing back what it reads (zeros for a hole `mkfs` left): metadata and the journal
/// then never need new space, and only data blocks fail once the store is full.
fn allocate_used_blocks(image: &Path, block: u64, len: u64, free: &[(u64, u64)]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let file = fs::OpenOptions::new().read(true).write(true).open(image)?;
    let blocks = len / block;
    let mut buf = vec![0u8; block as usize];
    let mut next = 0;
    let mut used = Vec::new();
    for &(a, b) in free {
        if a > next {
            used.push((next, a));
        }
        next = b + 1;
    }
    if next < blocks {
        used.push((next, blocks));
    }
    for (from, to) in used {
        for n in from..to {
            file.read_exact_at(&mut buf, n * block)?;
            file.write_all_at(&buf, n * block)?;
        }
    }
    file.sync_all()
}

impl LoopFs {
    /// Mounts a fresh file system of `size`.
    pub fn mount(size: LoopFsSize) -> Result<Self, Unsupported> {
        let fail = |what: &str, e: String| Unsupported(format!("{what}: {e}"));
        if !rustix::process::geteuid().is_root() {
            return Err(Unsupported("not running as root (loop devices and mounts need it)".into()));
        }
        if !Path::new("/dev/loop-control").exists() {
            return Err(Unsupported(
                "the kernel offers no loop devices (/dev/loop-control is missing)".into(),
            ));
        }
        let root = tempfile::Builder::new()
            .prefix("tierlog-loopfs-")
            .tempdir()
            .map_err(|e| fail("creating a temporary directory", e.to_string()))?;
        let mnt = root.path().join("mnt");
        let mut fs = Self { root, mnt, device: None, mounted: false, backing_mounted: false };
        let backing = fs.backing_dir();
        let mnt = fs.mnt.clone();
        for dir in [&backing, &mnt] {
            fs::create_dir_all(dir).map_err(|e| fail("creating a mount point", e.to_string()))?;
        }
        run(Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={}m", size.backing_mib))
            .arg("tmpfs")
            .arg(&backing))
        .map_err(|e| fail("mounting the tmpfs backing store", e))?;
        fs.backing_mounted = true;
        let image = fs.image();
        let file = fs::File::create(&image).map_err(|e| fail("creating the disk image", e.to_string()))?;
        file.set_len(size.image_mib << 20).map_err(|e| fail("sizing the disk image", e.to_string()))?;
        drop(file);
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-b", "4096", "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0"])
            .arg(&image))
        .map_err(|e| fail("formatting the disk image", e))?;
        let (block, free) = free_blocks(&image).map_err(|e| fail("listing the image's free blocks", e))?;
        allocate_used_blocks(&image, block, size.image_mib << 20, &free)
            .map_err(|e| fail("allocating the image's metadata and journal blocks", e.to_string()))?;
        let device = run(Command::new("losetup").args(["--find", "--show"]).arg(&image))
            .map_err(|e| fail("attaching a loop device", e))?
            .trim()
            .to_owned();
        fs.device = Some(device.clone());
        let limit =
            Path::new("/sys/block").join(device.trim_start_matches("/dev/")).join("queue/max_sectors_kb");
        fs::write(&limit, "4")
            .map_err(|e| fail("limiting the loop device to requests of one block", e.to_string()))?;
        fs.mount_image().map_err(|e| fail("mounting the ext4 image", e))?;
        Ok(fs)
    }

    /// [`mount`](Self::mount), or `None` after printing a loud `SKIPPED` line naming
    /// `test` and the reason to standard error (and standard output, which a test runner
    /// shows for a passing test only on request: the error stream is always kept).
    pub fn mount_or_explain(test: &str, size: LoopFsSize) -> Option<Self> {
        match Self::mount(size) {
            Ok(fs) => Some(fs),
            Err(why) => {
                eprintln!("SKIPPED: {test} needs a real ext4 file system on a loop device: {why}");
                None
            }
        }
    }

    /// The mounted ext4 file system's root.
    pub fn path(&self) -> &Path {
        &self.mnt
    }

    fn backing_dir(&self) -> PathBuf {
        self.root.path().join("backing")
    }

    fn image(&self) -> PathBuf {
        self.backing_dir().join("disk.img")
    }

    fn filler(&self) -> PathBuf {
        self.backing_dir().join("filler")
    }

    fn mount_image(&mut self) -> Result<(), String> {
        let device = self.device.clone().ok_or("no loop device attached")?;
        run(Command::new("mount").args(["-t", "ext4"]).arg(&device).arg(&self.mnt))?;
        self.mounted = true;
        Ok(())
    }

    /// Fills the backing store: from now on ext4's writeback of new data blocks fails.
    /// Returns the filler's size in bytes.
    pub fn fill(&self) -> io::Result<u64> {
        let mut file = fs::File::create(self.filler())?;
        let chunk = vec![0u8; 64 << 10];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) => return Ok(written),
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(28) => return Ok(written),
                Err(e) => return Err(e),
            }
        }
    }

    /// Frees the backing store again (removes the filler).
    pub fn free(&self) -> io::Result<()> {
        match fs::remove_file(self.filler()) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Unmounts and mounts the file system again: the page cache is gone, and what is
    /// read afterwards is what the disk holds. Every file under [`path`](Self::path) must
    /// be closed.
    pub fn remount(&mut self) -> io::Result<()> {
        run(Command::new("umount").arg(&self.mnt)).map_err(io::Error::other)?;
        self.mounted = false;
        self.mount_image().map_err(io::Error::other)
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = run(Command::new("umount").arg(&self.mnt));
        }
        if let Some(device) = self.device.take() {
            let _ = run(Command::new("losetup").arg("-d").arg(device));
        }
        if self.backing_mounted {
            let _ = run(Command::new("umount").arg(self.backing_dir()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{io::Write, os::unix::fs::FileExt};

    use super::*;

    /// The behaviour the file system is here for: after a failed writeback, a second
    /// `fdatasync` succeeds, the page cache still shows the lost bytes, and after a
    /// remount they read back as zeros while later, successfully synced data survives.
    #[test]
    fn a_failed_writeback_is_forgotten_by_the_next_fsync_and_lost_at_remount() {
        let Some(mut fs) = LoopFs::mount_or_explain("loopfs self-test", LoopFsSize::default()) else {
            return;
        };
        let path = fs.path().join("wal");
        let mut file =
            fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path).unwrap();
        file.write_all(&[b'a'; 8192]).unwrap();
        file.sync_data().unwrap();
        assert!(fs.fill().unwrap() > 0);
        let lost = [b'b'; 65536];
        let first = file.write_all(&lost).and_then(|()| file.sync_data());
        assert!(first.is_err(), "writeback into a full backing store must fail");
        fs.free().unwrap();
        file.sync_data().expect("the kernel reports a writeback error once: the second fsync succeeds");
        let mut cached = [0u8; 4];
        file.read_exact_at(&mut cached, 8192).unwrap();
        assert_eq!(&cached, b"bbbb", "the page cache still shows the bytes that never reached the disk");
        file.write_all_at(&[b'c'; 4096], 8192 + 65536).unwrap();
        file.sync_data().unwrap();
        drop(file);
        fs.remount().unwrap();
        let file = fs::File::open(&path).unwrap();
        let mut after = [0u8; 4];
        file.read_exact_at(&mut after, 8192).unwrap();
        assert_eq!(after, [0; 4], "the failed bytes are gone from the disk");
        file.read_exact_at(&mut after, 8192 + 65536).unwrap();
        assert_eq!(&after, b"cccc", "later synced data is on the disk");
    }
}
