//! Self-describing record payloads: which writer wrote the record, its sequence number,
//! deterministic padding and a CRC-32C over all of it, so a verifier can tell a record's
//! identity and integrity from its bytes alone.
//!
//! Grammar (ASCII): `w<writer>:s<seq>:<padding>:<crc32c as 8 lowercase hex digits>`.

use bytes::Bytes;

/// The identity of one record written by a chaos producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordId {
    /// The writer (unique across producer restarts: incarnation × writers + task).
    pub writer: u64,
    /// The writer's sequence number (never reused, even after a failed append).
    pub seq: u64,
}

/// Why a payload is not one a chaos producer wrote intact.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed chaos payload: {0}")]
pub struct PayloadError(pub String);

/// The payload of record `id`: 20 to 200 bytes of padding chosen by the sequence number.
pub fn encode(id: RecordId) -> Bytes {
    let pad_len = 20 + (id.seq.wrapping_mul(2_654_435_761) % 181) as usize;
    let pad_char = b'a' + (id.seq % 26) as u8;
    let mut body = format!("w{}:s{}:", id.writer, id.seq).into_bytes();
    body.extend(std::iter::repeat_n(pad_char, pad_len));
    body.push(b':');
    let crc = crc32c::crc32c(&body);
    body.extend_from_slice(format!("{crc:08x}").as_bytes());
    Bytes::from(body)
}

/// The identity a payload carries, after checking its checksum and padding.
pub fn decode(payload: &[u8]) -> Result<RecordId, PayloadError> {
    let err = |m: &str| PayloadError(m.to_owned());
    if payload.len() < 9 {
        return Err(err("too short"));
    }
    let (body, crc_hex) = payload.split_at(payload.len() - 8);
    let crc_text = std::str::from_utf8(crc_hex).map_err(|_| err("checksum is not ASCII"))?;
    let crc = u32::from_str_radix(crc_text, 16).map_err(|_| err("checksum is not hex"))?;
    if crc32c::crc32c(body) != crc {
        return Err(err("checksum mismatch"));
    }
    let text = std::str::from_utf8(body).map_err(|_| err("body is not UTF-8"))?;
    let mut parts = text.splitn(3, ':');
    let writer = parts.next().and_then(|p| p.strip_prefix('w')).and_then(|p| p.parse().ok());
    let seq = parts.next().and_then(|p| p.strip_prefix('s')).and_then(|p| p.parse().ok());
    match (writer, seq) {
        (Some(writer), Some(seq)) => {
            let id = RecordId { writer, seq };
            if encode(id).as_ref() == payload { Ok(id) } else { Err(err("padding differs")) }
        }
        _ => Err(err("no writer/sequence fields")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_detects_flips() {
        for seq in [0, 1, 77, 1 << 40] {
            let id = RecordId { writer: 3, seq };
            let bytes = encode(id);
            assert_eq!(decode(&bytes), Ok(id));
            for i in 0..bytes.len() {
                let mut flipped = bytes.to_vec();
                flipped[i] ^= 0x04;
                assert!(decode(&flipped).is_err(), "flip at {i} undetected");
            }
            assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        }
    }
}
