use bytes::{Bytes, BytesMut};

use crate::frame::{
    Decoder, Frame, FrameRecord, MAGIC, encode_appended, encode_close, encode_end, encode_error,
    encode_magic, encode_record, encode_tier,
};
use crate::{ApiError, Data, ErrorKind, NewRecordJson, RecordJson, Start, Tier};

fn record() -> FrameRecord {
    FrameRecord {
        offset: 7,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::from_static(b"k")),
        headers: vec![(Bytes::from_static(b"h"), Bytes::from_static(b"v"))],
        payload: Bytes::from_static(b"hello"),
    }
}

#[test]
fn a_record_frame_has_the_documented_bytes() {
    let mut buf = BytesMut::new();
    encode_magic(&mut buf);
    encode_record(&mut buf, &record());
    let mut expected = b"TLB\x01".to_vec();
    expected.extend_from_slice(&41u32.to_be_bytes());
    expected.push(0);
    expected.extend_from_slice(&7u64.to_be_bytes());
    expected.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    expected.extend_from_slice(&1u32.to_be_bytes());
    expected.push(b'k');
    expected.extend_from_slice(&1u32.to_be_bytes());
    expected.extend_from_slice(&1u32.to_be_bytes());
    expected.push(b'h');
    expected.extend_from_slice(&1u32.to_be_bytes());
    expected.push(b'v');
    expected.extend_from_slice(b"hello");
    // len counts everything after the length field: kind .. payload.
    assert_eq!(expected.len() - 8, 41);
    assert_eq!(&buf[..], &expected[..]);
}

#[test]
fn a_tier_frame_has_the_documented_bytes_and_an_unknown_name_decodes_as_unknown() {
    let mut buf = BytesMut::new();
    encode_magic(&mut buf);
    encode_tier(&mut buf, Tier::Warm);
    assert_eq!(&buf[4..], b"\x00\x00\x00\x05\x02warm");
    let mut newer = buf.clone();
    newer.extend_from_slice(b"\x00\x00\x00\x06\x02cache");
    newer.extend_from_slice(b"\x00\x00\x00\x03\x02\xff\xfe");
    let mut decoder = Decoder::new();
    decoder.push(&newer);
    assert_eq!(decoder.next_frame().unwrap(), Some(Frame::Tier(Tier::Warm)));
    assert_eq!(decoder.next_frame().unwrap(), Some(Frame::Tier(Tier::Unknown)), "a newer server's tier");
    let e = decoder.next_frame().expect_err("a name that is not UTF-8");
    assert_eq!(e.position, 4 + 9 + 10 + 5, "{e}");
}

#[test]
fn append_stream_frames_have_the_documented_bytes() {
    let mut buf = BytesMut::new();
    encode_end(&mut buf);
    assert_eq!(&buf[..], b"\x00\x00\x00\x01\x03", "end: len 1, kind 3, no body");
    buf.clear();
    encode_appended(&mut buf, 7, 0x0102);
    let mut expected = vec![0, 0, 0, 17, 4];
    expected.extend_from_slice(&7u64.to_be_bytes());
    expected.extend_from_slice(&0x0102u64.to_be_bytes());
    assert_eq!(&buf[..], &expected[..], "appended: len 17, kind 4, start, end");
    buf.clear();
    let error = ApiError::new(ErrorKind::Closed, "draining");
    encode_close(&mut buf, &error);
    let json = serde_json::to_vec(&error).unwrap();
    assert_eq!(&buf[..5], &[&((json.len() + 1) as u32).to_be_bytes()[..], &[5]].concat()[..]);
    assert_eq!(&buf[5..], &json[..], "close: the error's JSON");

    // Malformed stream frames are errors naming where.
    for (bad, says) in [
        (&b"TLB\x01\x00\x00\x00\x02\x03\x00"[..], "end frame has no body"),
        (&b"TLB\x01\x00\x00\x00\x02\x04\x00"[..], "not 16"),
        (&b"TLB\x01\x00\x00\x00\x03\x05{}"[..], "malformed close frame"),
    ] {
        let mut decoder = Decoder::new();
        decoder.push(bad);
        let e = decoder.next_frame().expect_err(says);
        assert!(e.message.contains(says), "{e}");
        assert_eq!(e.position, 9, "{e}");
    }
    let mut reversed = BytesMut::new();
    encode_magic(&mut reversed);
    encode_appended(&mut reversed, 9, 8);
    let mut decoder = Decoder::new();
    decoder.push(&reversed);
    assert!(decoder.next_frame().expect_err("reversed").message.contains("reversed"));
}

#[test]
fn frames_round_trip_whatever_the_chunking() {
    let mut buf = BytesMut::new();
    encode_magic(&mut buf);
    let records: Vec<FrameRecord> = (0..20u64)
        .map(|i| FrameRecord {
            offset: i,
            timestamp: i as i64,
            key: (i % 2 == 0).then(|| Bytes::from(format!("key{i}"))),
            headers: (0..i % 3).map(|h| (Bytes::from(format!("n{h}")), Bytes::new())).collect(),
            payload: Bytes::from(vec![i as u8; i as usize]),
        })
        .collect();
    // A tier frame before every fifth record (as a read with `tiers=true` sends when the
    // serving tier changes).
    let tiers = [Tier::Cold, Tier::Warm, Tier::Hot, Tier::Live];
    let mut expected = Vec::new();
    for (i, r) in records.iter().enumerate() {
        if i % 5 == 0 {
            encode_tier(&mut buf, tiers[i / 5]);
            expected.push(Frame::Tier(tiers[i / 5]));
        }
        encode_record(&mut buf, r);
        expected.push(Frame::Record(r.clone()));
        // An append stream's frames, between them.
        if i % 7 == 6 {
            encode_end(&mut buf);
            encode_appended(&mut buf, i as u64, i as u64 + 3);
            expected.extend([Frame::End, Frame::Appended { start: i as u64, end: i as u64 + 3 }]);
        }
    }
    let closing = ApiError::new(ErrorKind::Closed, "the server is draining");
    encode_close(&mut buf, &closing);
    expected.push(Frame::Close(closing));
    let error = ApiError::new(ErrorKind::Unavailable, "warm did not answer");
    expected.push(Frame::Error(error.clone()));
    encode_error(&mut buf, &error);
    let body = buf.freeze();
    // Chunks copied in (`push`), handed over (`push_bytes`), and the two alternating.
    for how in ["copied", "handed over", "alternating"] {
        for chunk in [1usize, 3, 7, 64, body.len()] {
            let mut decoder = Decoder::new();
            let mut got = Vec::new();
            for (i, at) in (0..body.len()).step_by(chunk).enumerate() {
                let piece = body.slice(at..(at + chunk).min(body.len()));
                match how {
                    "copied" => decoder.push(&piece),
                    "handed over" => decoder.push_bytes(piece),
                    _ if i % 2 == 0 => decoder.push(&piece),
                    _ => decoder.push_bytes(piece),
                }
                while let Some(frame) = decoder.next_frame().expect("a valid body") {
                    got.push(frame);
                }
            }
            decoder.finish().expect("the body ends between frames");
            assert_eq!(got, expected, "chunks of {chunk}, {how}");
        }
    }
}

#[test]
fn a_body_handed_over_whole_is_decoded_without_copying_it() {
    let mut buf = BytesMut::new();
    encode_magic(&mut buf);
    for _ in 0..3 {
        encode_record(&mut buf, &record());
    }
    let body = buf.freeze();
    let within = |b: &Bytes| body.as_ptr_range().contains(&b.as_ptr());
    let mut decoder = Decoder::new();
    decoder.push_bytes(body.clone());
    let frame_len = (body.len() - MAGIC.len()) / 3;
    for taken in 1..=3 {
        let Some(Frame::Record(r)) = decoder.next_frame().unwrap() else { panic!("a record frame") };
        assert!(within(&r.payload), "the payload is a slice of the body");
        // The frames not yet taken are buffered.
        assert_eq!(decoder.buffered(), (3 - taken) * frame_len);
    }
    assert_eq!(decoder.next_frame().unwrap(), None);
    decoder.finish().unwrap();

    // Cut inside a frame and finished there: an error naming the bytes pending, from
    // either buffer.
    let mut decoder = Decoder::new();
    decoder.push_bytes(body.slice(..body.len() - 2));
    while decoder.next_frame().unwrap().is_some() {}
    assert_eq!(decoder.buffered(), frame_len - 2);
    let e = decoder.finish().expect_err("the body ends inside a frame");
    assert!(e.message.contains("inside a frame"), "{e}");
}

#[test]
fn truncated_and_garbled_bodies_are_errors_not_panics() {
    let mut buf = BytesMut::new();
    encode_magic(&mut buf);
    encode_record(&mut buf, &record());
    for cut in 0..buf.len() {
        let mut decoder = Decoder::new();
        decoder.push(&buf[..cut]);
        assert_eq!(decoder.next_frame(), Ok(None), "cut at {cut}");
        // The magic alone is a complete body of no frames.
        assert_eq!(decoder.finish().is_ok(), cut == MAGIC.len(), "a body cut at {cut}");
    }
    // Every single-byte corruption decodes to something or fails cleanly.
    for i in 0..buf.len() {
        let mut bad = buf.to_vec();
        bad[i] ^= 0xA5;
        let mut decoder = Decoder::new();
        decoder.push(&bad);
        let _ = decoder.next_frame();
    }
    let mut decoder = Decoder::new();
    decoder.push(b"TLB\x02");
    let e = decoder.next_frame().expect_err("version 2 is refused");
    assert!(e.message.contains("version 2"), "{e}");
    let mut decoder = Decoder::new();
    decoder.push(b"{\"records\"");
    assert!(decoder.next_frame().expect_err("JSON is not a batch body").message.contains("magic"));
    assert_eq!(MAGIC, *b"TLB\x01");
}

#[test]
fn a_header_count_past_the_frame_is_an_error() {
    let mut buf = BytesMut::new();
    encode_magic(&mut buf);
    let mut frame = Vec::new();
    frame.push(0u8);
    frame.extend_from_slice(&0u64.to_be_bytes());
    frame.extend_from_slice(&0i64.to_be_bytes());
    frame.extend_from_slice(&u32::MAX.to_be_bytes());
    frame.extend_from_slice(&u32::MAX.to_be_bytes()); // 4 billion headers, none present
    buf.extend_from_slice(&(frame.len() as u32).to_be_bytes());
    buf.extend_from_slice(&frame);
    let mut decoder = Decoder::new();
    decoder.push(&buf);
    let e = decoder.next_frame().expect_err("headers missing");
    assert!(e.message.contains("header name length"), "{e}");
}

#[test]
fn json_bytes_are_text_or_base64() {
    assert_eq!(serde_json::to_string(&Data::from_bytes(b"hi")).expect("json"), r#""hi""#);
    let binary = Data::from_bytes(&[0xff, 0]);
    assert_eq!(serde_json::to_string(&binary).expect("json"), r#"{"base64":"/wA="}"#);
    assert_eq!(binary.to_bytes().expect("base64"), Bytes::from_static(&[0xff, 0]));
    let r: NewRecordJson =
        serde_json::from_str(r#"{"value": "v", "key": {"base64": "AQ=="}}"#).expect("json");
    assert_eq!(r.payload, Data::from("v"));
    assert_eq!(r.key.expect("key").to_bytes().expect("base64"), Bytes::from_static(&[1]));
    let e = Data::Base64 { base64: "!".into() }.to_bytes().expect_err("not base64");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

#[test]
fn error_bodies_have_the_documented_shape() {
    let e = ApiError::new(ErrorKind::NotFound, "topic 'x' does not exist");
    assert_eq!(
        serde_json::to_string(&e).expect("json"),
        r#"{"error":{"kind":"not_found","message":"topic 'x' does not exist"}}"#
    );
    assert_eq!(e.kind().status(), 404);
    assert_eq!(ErrorKind::Fenced.status(), 409);
    assert_eq!(ErrorKind::TooLarge.status(), 413);
    assert_eq!(ErrorKind::Closed.status(), 503);
    // A refused append whose outcome is unknown names where it may be committed; a body
    // without the field (every other error, and servers before it) parses as `None`.
    let unknown = ApiError::new(ErrorKind::Unavailable, "not acknowledged")
        .with_may_commit(crate::RangeJson { start: 2, end: 5 });
    let json = serde_json::to_string(&unknown).expect("json");
    assert_eq!(
        json,
        r#"{"error":{"kind":"unavailable","message":"not acknowledged","may_commit":{"start":2,"end":5}}}"#
    );
    assert_eq!(serde_json::from_str::<ApiError>(&json).expect("parse"), unknown);
    let old: ApiError =
        serde_json::from_str(r#"{"error":{"kind":"unavailable","message":"m"}}"#).expect("parse");
    assert_eq!(old.may_commit(), None);
}

#[test]
fn start_positions_parse_and_print() {
    assert_eq!(Start::parse("earliest"), Ok(Start::Earliest));
    assert_eq!(Start::parse("latest"), Ok(Start::Latest));
    assert_eq!(Start::parse("offset:42"), Ok(Start::Offset(42)));
    assert_eq!(Start::parse("42"), Ok(Start::Offset(42)));
    assert_eq!(Start::parse("time:1700000000000"), Ok(Start::Time(1_700_000_000_000)));
    assert_eq!(Start::parse("time:2023-11-14T22:13:20Z"), Ok(Start::Time(1_700_000_000_000)));
    for bad in ["", "offset:", "offset:-1", "time:yesterday", "first"] {
        assert_eq!(Start::parse(bad).map_err(|e| e.kind()), Err(ErrorKind::InvalidInput), "{bad:?}");
    }
    for start in [Start::Earliest, Start::Latest, Start::Offset(7), Start::Time(9)] {
        assert_eq!(Start::parse(&start.to_query()), Ok(start));
    }
}

#[test]
fn a_json_record_carries_its_tier_and_reads_without_one() {
    let line = r#"{"offset":3,"tier":"cold","timestamp":5,"key":null,"headers":[],"payload":"p"}"#;
    let record: RecordJson = serde_json::from_str(line).expect("a record with a tier");
    assert_eq!(record.tier, Some(Tier::Cold));
    assert_eq!(serde_json::to_string(&record).expect("serialises"), line);
    // A server that predates the field: no tier, and nothing else changes.
    let old = r#"{"offset":3,"timestamp":5,"key":null,"headers":[],"payload":"p"}"#;
    let record: RecordJson = serde_json::from_str(old).expect("a record without a tier");
    assert_eq!(record.tier, None);
    assert_eq!(serde_json::to_string(&record).expect("serialises"), old);
    for tier in [Tier::Cold, Tier::Warm, Tier::Hot, Tier::Live] {
        assert_eq!(serde_json::to_value(tier).expect("serialises"), tier.as_str());
    }
}

#[test]
fn a_record_from_a_newer_server_with_a_tier_this_client_does_not_know_still_decodes() {
    let line = r#"{"offset":3,"tier":"shared_cache","timestamp":5,"key":null,"headers":[],"payload":"hi"}"#;
    let record: RecordJson = serde_json::from_str(line).expect("decodes");
    assert_eq!(record.offset, 3);
    assert_eq!(record.tier, Some(Tier::Unknown));
    let known: RecordJson = serde_json::from_str(&line.replace("shared_cache", "cold")).expect("decodes");
    assert_eq!(known.tier, Some(Tier::Cold));
}
