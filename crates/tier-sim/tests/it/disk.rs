//! The power-cut models of `tier_sim::disk` on real files: what a cut by page may leave,
//! and what it must never touch.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use tier_sim::disk::{CutModel, Disk, PAGE};
use tier_sim::rng::Rng;

/// A data directory with one topic holding one segment file of `len` bytes, every byte
/// non-zero (`1 + position % 251`), and the durable lengths to cut with.
fn setup(root: &Path, len: u64, durable: Option<u64>) -> (PathBuf, PathBuf, HashMap<PathBuf, u64>) {
    let data = root.join("hot");
    let topic = data.join("t");
    std::fs::create_dir_all(&topic).expect("topic directory");
    let path = topic.join("00000000000000000000.seg");
    let bytes: Vec<u8> = (0..len).map(|i| u8::try_from(1 + i % 251).expect("below 256")).collect();
    std::fs::write(&path, bytes).expect("segment file");
    let synced = durable.map(|d| HashMap::from([(path.clone(), d)])).unwrap_or_default();
    (data, path, synced)
}

/// What a cut left of a file: gone, or its bytes.
fn after_cut(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

#[test]
fn a_cut_by_page_keeps_the_durable_bytes_and_loses_whole_pages_past_them() {
    let (len, durable) = (3 * PAGE + 1000, PAGE + 300);
    let mut kinds = BTreeSet::new();
    for seed in 0..400 {
        let root = tempfile::tempdir().expect("temporary directory");
        let (data, path, synced) = setup(root.path(), len, Some(durable));
        let mut disk = Disk::default();
        disk.power_cut(&data, &synced, &[], CutModel::Pages, 40, &mut Rng::new(seed)).expect("power cut");
        let bytes = after_cut(&path).expect("a file with a durable length stays");
        let size = bytes.len() as u64;
        assert!((durable..=len).contains(&size), "seed {seed}: size {size}");
        let original = |i: u64| u8::try_from(1 + i % 251).expect("below 256");
        for (i, &b) in bytes.iter().enumerate() {
            let i = i as u64;
            if i < durable {
                assert_eq!(b, original(i), "seed {seed}: durable byte {i} changed");
            } else {
                assert!(b == original(i) || b == 0, "seed {seed}: byte {i} is neither written nor zero");
            }
        }
        // Zeros past the durable length come by page: a zeroed byte's page is zero from
        // the durable length (or the page's start) to its end (or the file's).
        let mut hole_before_data = false;
        for page in (durable / PAGE)..size.div_ceil(PAGE) {
            let lo = (page * PAGE).max(durable);
            let hi = ((page + 1) * PAGE).min(size);
            let span = &bytes[lo as usize..hi as usize];
            let zeroed = span.iter().filter(|&&b| b == 0).count();
            assert!(zeroed == 0 || zeroed == span.len(), "seed {seed}: page {page} zeroed in part");
            if zeroed > 0 && bytes[hi as usize..].iter().any(|&b| b != 0) {
                hole_before_data = true;
            }
        }
        kinds.insert(match size {
            s if s == durable => "cut to the durable length",
            s if s == len && hole_before_data => "size persisted, a hole before written pages",
            s if s == len && bytes.contains(&0) => "size persisted, its tail zeros",
            s if s == len => "everything written back",
            _ if hole_before_data => "shorter, a hole before written pages",
            _ => "shorter",
        });
    }
    assert_eq!(kinds.len(), 6, "every outcome is reached: {kinds:?}");
}

#[test]
fn a_new_file_may_come_back_gone_empty_or_as_its_size_of_zeros() {
    let len = 2 * PAGE + 500;
    let mut kinds = BTreeSet::new();
    for seed in 0..200 {
        let root = tempfile::tempdir().expect("temporary directory");
        let (data, path, synced) = setup(root.path(), len, None);
        let mut disk = Disk::default();
        let cut =
            disk.power_cut(&data, &synced, &[], CutModel::Pages, 40, &mut Rng::new(seed)).expect("power cut");
        let kind = match after_cut(&path) {
            None => "gone",
            Some(b) if b.is_empty() => "empty",
            Some(b) if b.len() as u64 == len && b.iter().all(|&x| x == 0) => "its size of zeros",
            Some(b) if b.len() < 40 || b[..40].iter().all(|&x| x == 0) => {
                "pages, the header's not written back"
            }
            Some(_) => "pages, the header's written back",
        };
        if matches!(kind, "gone" | "empty" | "its size of zeros") {
            assert_eq!(cut.headers, 1, "seed {seed}: {kind} counts as a new file lost");
        }
        kinds.insert(kind);
    }
    assert_eq!(kinds.len(), 5, "every outcome is reached: {kinds:?}");
}

#[test]
fn a_cut_by_byte_never_goes_below_the_header_nor_zeroes_anything() {
    for seed in 0..100 {
        let root = tempfile::tempdir().expect("temporary directory");
        let (data, path, synced) = setup(root.path(), 5000, None);
        let mut disk = Disk::default();
        disk.power_cut(&data, &synced, &[], CutModel::Bytes, 40, &mut Rng::new(seed)).expect("power cut");
        let bytes = after_cut(&path).expect("the byte model removes no file");
        assert!(bytes.len() >= 40, "seed {seed}: cut below the header");
        assert!(!bytes.contains(&0), "seed {seed}: the byte model zeroed bytes");
    }
}

/// Directory operations since a directory's durable listing are undone: a file created
/// since is gone, one unlinked since is back, one renamed over since is the old file
/// again — and a directory whose operations are kept is left alone.
#[test]
fn undoing_a_directory_puts_back_its_durable_listing() {
    let root = tempfile::tempdir().expect("temporary directory");
    let (data, kept, _) = setup(root.path(), 100, Some(100));
    let topic = kept.parent().expect("topic directory").to_owned();
    let marker = topic.join("00000000000000000005-00000000000000000009.gap");
    std::fs::write(&marker, b"old").expect("marker");
    let state = topic.join("state");
    std::fs::write(&state, b"old state").expect("state file");
    tier_hot::faults::track_directories(&data);

    std::fs::remove_file(&marker).expect("unlink");
    let created = topic.join("00000000000000000100.seg");
    std::fs::write(&created, b"new segment").expect("create");
    let tmp = topic.join("state.tmp");
    std::fs::write(&tmp, b"new state").expect("write tmp");
    std::fs::rename(&tmp, &state).expect("rename over");
    let listings = tier_hot::faults::dir_listings(&data);
    assert_eq!(listings.directories(), vec![data.clone(), topic.clone()]);

    let undone = listings.undo(&topic).expect("undo");
    assert_eq!(undone.removed, vec![created.clone()]);
    assert_eq!(undone.restored.len(), 2, "{undone:?}");
    assert!(!created.exists(), "a file created since the directory's fsync is gone");
    assert_eq!(std::fs::read(&marker).expect("marker back"), b"old");
    assert_eq!(std::fs::read(&state).expect("state"), b"old state", "the rename is undone");
    assert_eq!(std::fs::read(&kept).expect("kept").len(), 100, "a file it listed stays");
    assert_eq!(listings.undo(&data).expect("undo the data directory"), tier_hot::faults::Undone::default());
    tier_hot::faults::untrack_directories(&data);
}
