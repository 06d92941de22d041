use bytes::Bytes;

use crate::{Offset, Timestamp};

/// One record header: a name and a value, both arbitrary bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// Header name.
    pub name: Bytes,
    /// Header value.
    pub value: Bytes,
}

impl Header {
    /// A header from anything that converts into bytes.
    pub fn new(name: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        Self { name: name.into(), value: value.into() }
    }
}

/// A record as read back from a tier.
///
/// `key`, header and `payload` bytes are slices of the batch buffer they were decoded
/// from: reading does not copy payloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Position in the topic.
    pub offset: Offset,
    /// Publish time, milliseconds since the Unix epoch.
    pub timestamp: Timestamp,
    /// Optional key.
    pub key: Option<Bytes>,
    /// Headers in the order they were written.
    pub headers: Vec<Header>,
    /// The payload.
    pub payload: Bytes,
}

impl Record {
    /// The bytes this record counts for in a [`ReadLimit`](crate::ReadLimit): key,
    /// header names and values, and payload.
    pub fn size(&self) -> usize {
        self.key.as_ref().map_or(0, Bytes::len)
            + self.headers.iter().map(|h| h.name.len() + h.value.len()).sum::<usize>()
            + self.payload.len()
    }
}
