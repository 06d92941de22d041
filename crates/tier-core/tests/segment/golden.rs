//! Golden bytes: the encodings are pinned byte for byte, CRCs included.

use tier_core::TopicName;
use tier_core::segment::{
    DecodeError, FORMAT_VERSION, INDEX_ENTRY_LEN, IndexEntry, SegmentHeader, TRAILER_LEN, Trailer,
    is_supported_version,
};

/// CRC-32C of the golden header's first 36 bytes, pinned.
const HEADER_CRC: u32 = 0x0edb_c7e2;
/// CRC-32C of the golden trailer's first 76 bytes, pinned.
const TRAILER_CRC: u32 = 0x0bb0_e390;

fn golden_header() -> SegmentHeader {
    SegmentHeader::new(TopicName::new("ab").unwrap(), 0x0102, 0x0a0b).with_index_interval_bytes(0x40)
}

#[test]
fn header_encoding_is_pinned() {
    let header = golden_header();
    let bytes = header.encode();
    #[rustfmt::skip]
    let expected: Vec<u8> = [
        &b"TIERLOG\0"[..],                 // magic
        &[1, 0],                           // version 1
        &[0, 0],                           // flags
        &[0x40, 0, 0, 0],                  // index interval 64
        &[0x02, 0x01, 0, 0, 0, 0, 0, 0],   // base offset 0x102
        &[0x0b, 0x0a, 0, 0, 0, 0, 0, 0],   // created at 0xa0b
        &[2, 0],                           // topic length
        b"ab",                             // topic
        &HEADER_CRC.to_le_bytes(),         // CRC-32C of the above
    ]
    .concat();
    assert_eq!(bytes.len(), header.encoded_len());
    assert_eq!(&bytes[..36], &expected[..36]);
    assert_eq!(crc32c::crc32c(&bytes[..36]).to_le_bytes(), bytes[36..40]);
    assert_eq!(bytes, expected, "header CRC is {:#010x}", crc32c::crc32c(&bytes[..36]));
    assert_eq!(SegmentHeader::decode(&bytes).unwrap(), (header, 40));
}

#[test]
fn index_entry_encoding_is_pinned() {
    let e = IndexEntry { offset: 0x0102, max_timestamp: -2, position: 0x0304 };
    #[rustfmt::skip]
    let expected: Vec<u8> = [
        &[0x02, 0x01, 0, 0, 0, 0, 0, 0][..],               // offset
        &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], // max timestamp -2
        &[0x04, 0x03, 0, 0, 0, 0, 0, 0],                   // position
    ]
    .concat();
    assert_eq!(e.encode().len(), INDEX_ENTRY_LEN);
    assert_eq!(&e.encode()[..], &expected[..]);
    assert_eq!(IndexEntry::decode(&expected).unwrap(), e);
}

fn golden_trailer() -> Trailer {
    Trailer {
        index_position: 0x1000,
        base_offset: 0x0102,
        end_offset: 0x0112,
        record_count: 0x10,
        batch_count: 3,
        min_timestamp: -1,
        max_timestamp: 0x7000,
        header_len: 40,
        index_entry_count: 2,
        index_interval_bytes: 0x40,
        index_crc: 0xdead_beef,
    }
}

#[test]
fn trailer_encoding_is_pinned() {
    let t = golden_trailer();
    let bytes = t.encode();
    #[rustfmt::skip]
    let expected: Vec<u8> = [
        &[0, 0x10, 0, 0, 0, 0, 0, 0][..],                  // index position
        &[0x02, 0x01, 0, 0, 0, 0, 0, 0],                   // base offset
        &[0x12, 0x01, 0, 0, 0, 0, 0, 0],                   // end offset
        &[0x10, 0, 0, 0, 0, 0, 0, 0],                      // record count
        &[3, 0, 0, 0, 0, 0, 0, 0],                         // batch count
        &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], // min timestamp -1
        &[0, 0x70, 0, 0, 0, 0, 0, 0],                      // max timestamp
        &[40, 0, 0, 0],                                    // header length
        &[2, 0, 0, 0],                                     // index entry count
        &[0x40, 0, 0, 0],                                  // index interval
        &[0xef, 0xbe, 0xad, 0xde],                         // index CRC
        &[0, 0],                                           // flags
        &[1, 0],                                           // version
        &TRAILER_CRC.to_le_bytes(),                        // CRC-32C of bytes 0..76
        b"TIEREND\0",                                      // magic
    ]
    .concat();
    assert_eq!(bytes.len(), TRAILER_LEN);
    assert_eq!(&bytes[..76], &expected[..76]);
    assert_eq!(&bytes[80..], &expected[80..]);
    assert_eq!(&bytes[..], &expected[..], "trailer CRC is {:#010x}", crc32c::crc32c(&bytes[..76]));
    assert_eq!(Trailer::decode(&bytes).unwrap(), t);
    assert_eq!(t.index_len(), 48);
    assert_eq!(t.segment_len(), 0x1000 + 48 + 88);
}

#[test]
fn unknown_versions_are_named_in_the_error() {
    assert!(is_supported_version(FORMAT_VERSION));
    assert!(!is_supported_version(0));
    assert!(!is_supported_version(2));

    // An intact header of another version (its CRC matches) is UnsupportedVersion.
    let mut header = golden_header().encode();
    header[8] = 2;
    let n = header.len();
    let crc = crc32c::crc32c(&header[..n - 4]).to_le_bytes();
    header[n - 4..].copy_from_slice(&crc);
    let err = SegmentHeader::decode(&header).unwrap_err();
    assert!(matches!(err, DecodeError::UnsupportedVersion { version: 2, .. }), "{err:?}");
    assert!(err.to_string().contains("version 2"), "{err}");

    let mut trailer = golden_trailer().encode();
    trailer[74] = 9;
    let crc = crc32c::crc32c(&trailer[..76]).to_le_bytes();
    trailer[76..80].copy_from_slice(&crc);
    let err = Trailer::decode(&trailer).unwrap_err();
    assert!(matches!(err, DecodeError::UnsupportedVersion { version: 9, .. }), "{err:?}");
}

/// A flipped bit in a version field is damage, not a newer file: the CRC covers the
/// field, so the error is corruption (the chaos suite's damaged-topic row once got
/// `InvalidInput` for a trailer whose version byte it had flipped).
#[test]
fn a_damaged_version_field_is_corruption() {
    let ctx = || tier_core::ErrorContext::tier(tier_core::TierKind::Hot);
    let mut header = golden_header().encode();
    header[9] ^= 0x40;
    let err = SegmentHeader::decode(&header).unwrap_err();
    assert!(!matches!(err, DecodeError::UnsupportedVersion { .. }), "{err:?}");
    assert!(err.to_string().contains("version") && err.to_string().contains("CRC"), "{err}");
    assert_eq!(err.into_tier_error(ctx()).kind(), tier_core::ErrorKind::Corruption);

    let mut trailer = golden_trailer().encode();
    trailer[75] ^= 0x01;
    let err = Trailer::decode(&trailer).unwrap_err();
    assert!(matches!(err, DecodeError::Crc { .. }), "{err:?}");
    assert_eq!(err.into_tier_error(ctx()).kind(), tier_core::ErrorKind::Corruption);
}

#[test]
fn header_decoder_rejects_bad_fields() {
    let good = golden_header().encode();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            {
                let mut b = good.clone();
                b[0] = b'X';
                b
            },
            "magic",
        ),
        (
            {
                let mut b = good.clone();
                b[10] = 1;
                b
            },
            "flags",
        ),
        (
            {
                let mut b = good.clone();
                b[32] = 0;
                b
            },
            "topic name length 0",
        ),
        (
            {
                let mut b = good.clone();
                b[32] = 201;
                b
            },
            "topic name length 201",
        ),
        (
            {
                let mut b = good.clone();
                b[20] ^= 1;
                b
            },
            "CRC",
        ),
        (good[..39].to_vec(), "truncated"),
    ];
    for (bytes, why) in cases {
        let err = SegmentHeader::decode(&bytes).unwrap_err();
        assert!(err.to_string().contains(why), "{why}: {err}");
    }
    // A topic name that fails TopicName validation, with a correct CRC.
    let mut b = good[..36].to_vec();
    b[34] = b'/';
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    let err = SegmentHeader::decode(&b).unwrap_err();
    assert!(err.to_string().contains("topic"), "{err}");
}

#[test]
fn trailer_decoder_rejects_inconsistent_fields_even_with_a_valid_crc() {
    let cases: Vec<(Trailer, &str)> = vec![
        (Trailer { end_offset: 0x0100, ..golden_trailer() }, "before base offset"),
        (Trailer { record_count: 5, ..golden_trailer() }, "record count"),
        (Trailer { header_len: 10, ..golden_trailer() }, "header length"),
        (Trailer { index_position: 20, ..golden_trailer() }, "inside the header"),
        (Trailer { index_entry_count: 0, ..golden_trailer() }, "index entries"),
        (Trailer { batch_count: 17, ..golden_trailer() }, "batches for"),
        (Trailer { min_timestamp: 0x8000, ..golden_trailer() }, "min timestamp"),
        (Trailer { index_position: u64::MAX - 10, ..golden_trailer() }, "overflows"),
    ];
    for (t, why) in cases {
        let err = Trailer::decode(&t.encode()).unwrap_err();
        assert!(err.to_string().contains(why), "{why}: {err}");
    }
}
