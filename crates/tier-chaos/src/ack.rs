//! The acknowledgement log a chaos producer writes to its stdout, one line per acknowledged
//! append, so the runner knows exactly what was acknowledged before a kill.
//!
//! Line grammar: `ACK <start> <end> <writer> <first_seq>`: the records with sequence
//! numbers `first_seq..first_seq + (end - start)` of `writer` were acknowledged at offsets
//! `[start, end)`, in order. Other lines (`READY`, `ERR ...`, `CLOSED`) are status lines.

use tier_core::{Offset, OffsetRange};

use crate::payload::RecordId;

/// One acknowledged append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The offsets the append was acknowledged at.
    pub range: OffsetRange,
    /// The writer that appended.
    pub writer: u64,
    /// Sequence number of the first record.
    pub first_seq: u64,
}

impl Ack {
    /// The line the producer prints.
    pub fn to_line(&self) -> String {
        format!("ACK {} {} {} {}", self.range.start, self.range.end, self.writer, self.first_seq)
    }

    /// Parses an `ACK` line; `None` for any other (or a torn) line.
    pub fn parse(line: &str) -> Option<Self> {
        let mut fields = line.strip_prefix("ACK ")?.split(' ');
        let mut next = || fields.next().and_then(|f| f.parse::<u64>().ok());
        let (start, end, writer, first_seq) = (next()?, next()?, next()?, next()?);
        if end < start {
            return None;
        }
        Some(Self { range: OffsetRange { start, end }, writer, first_seq })
    }

    /// Each acknowledged offset with the record that must be there.
    pub fn records(&self) -> impl Iterator<Item = (Offset, RecordId)> + '_ {
        (self.range.start..self.range.end)
            .map(|o| (o, RecordId { writer: self.writer, seq: self.first_seq + (o - self.range.start) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_torn_lines_are_rejected() {
        let ack = Ack { range: OffsetRange { start: 10, end: 13 }, writer: 4, first_seq: 99 };
        assert_eq!(Ack::parse(&ack.to_line()), Some(ack));
        assert_eq!(Ack::parse("ACK 10 13 4"), None);
        assert_eq!(Ack::parse("ACK 13 10 4 1"), None);
        assert_eq!(Ack::parse("READY"), None);
        let ids: Vec<_> = ack.records().collect();
        assert_eq!(ids[2], (12, RecordId { writer: 4, seq: 101 }));
    }
}
