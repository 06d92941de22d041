//! The stream layout: entry IDs derived from base offsets, and decoding `XRANGE`
//! replies into record batches.
//!
//! Each batch is one stream entry with ID `<base_offset>-1` and a single field
//! [`BATCH_FIELD`] holding the batch's full encoding. The sequence part is 1, not 0,
//! because Valkey refuses the ID `0-0` and the first batch of a log has base offset 0;
//! keeping the same sequence number for every entry keeps the mapping one-to-one and
//! lets range queries use `<offset>-1` as "the entry of the batch starting at offset".

use bytes::Bytes;
use fred::types::Value;
use tier_core::{ErrorContext, Offset, RecordBatch, TierError};

/// The field of a stream entry that holds the encoded batch.
pub(crate) const BATCH_FIELD: &str = "b";

/// The stream ID of the batch whose base offset is `base`.
pub(crate) fn entry_id(base: Offset) -> String {
    format!("{base}-1")
}

/// One raw stream entry: its ID as the server sent it and its fields.
#[derive(Debug)]
pub(crate) struct RawEntry {
    pub(crate) id: String,
    pub(crate) fields: Vec<(Bytes, Bytes)>,
}

/// Parses an `XRANGE`/`XREVRANGE` reply into entries. An unexpected shape is
/// `Internal` (the server or client library misbehaved, not our data).
pub(crate) fn parse_entries(ctx: &ErrorContext, reply: Value) -> Result<Vec<RawEntry>, TierError> {
    let bad = |what: &str| TierError::internal(ctx.clone(), format!("unexpected stream reply: {what}"));
    let items = match reply {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        _ => return Err(bad("not an array")),
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Value::Array(mut pair) = item else {
            return Err(bad("entry is not an array"));
        };
        if pair.len() != 2 {
            return Err(bad("entry is not an [id, fields] pair"));
        }
        let fields_value = pair.pop().unwrap_or(Value::Null);
        let id_value = pair.pop().unwrap_or(Value::Null);
        let id = id_value.as_str().map(|s| s.into_owned()).ok_or_else(|| bad("entry ID is not a string"))?;
        let flat: Vec<Value> = match fields_value {
            Value::Array(v) => v,
            Value::Map(m) => m.inner().into_iter().flat_map(|(k, v)| [Value::from(k), v]).collect(),
            Value::Null => Vec::new(),
            _ => return Err(bad("entry fields are not an array")),
        };
        if !flat.len().is_multiple_of(2) {
            return Err(bad("entry has an odd number of field items"));
        }
        let mut fields = Vec::with_capacity(flat.len() / 2);
        let mut it = flat.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            let k = k.into_bytes().ok_or_else(|| bad("field name is not a string"))?;
            let v = v.into_bytes().ok_or_else(|| bad("field value is not a string"))?;
            fields.push((k, v));
        }
        out.push(RawEntry { id, fields });
    }
    Ok(out)
}

/// The base offset an entry ID stands for, if it is a well-formed `<offset>-1` ID.
pub(crate) fn parse_entry_id(id: &str) -> Option<Offset> {
    let (ms, seq) = id.split_once('-')?;
    if seq != "1" {
        return None;
    }
    ms.parse().ok()
}

impl RawEntry {
    /// The encoded batch bytes, without decoding them.
    pub(crate) fn batch_bytes(&self, ctx: &ErrorContext, key: &str) -> Result<&Bytes, TierError> {
        match self.fields.as_slice() {
            [(name, value)] if name.as_ref() == BATCH_FIELD.as_bytes() => Ok(value),
            _ => Err(TierError::corruption(
                entry_ctx(ctx, key, &self.id),
                format!(
                    "stream {key} entry {}: expected exactly one field '{BATCH_FIELD}', found {} fields",
                    self.id,
                    self.fields.len()
                ),
            )),
        }
    }

    /// Decodes the entry into a batch and checks that its ID names its base offset.
    /// Anything else is `Corruption` naming the stream key and the entry ID.
    pub(crate) fn decode(&self, ctx: &ErrorContext, key: &str) -> Result<RecordBatch, TierError> {
        let bytes = self.batch_bytes(ctx, key)?;
        let ectx = entry_ctx(ctx, key, &self.id);
        let batch = RecordBatch::decode(bytes).map_err(|e| {
            TierError::corruption(
                ectx.clone(),
                format!("stream {key} entry {} does not hold a valid record batch", self.id),
            )
            .with_source(e)
        })?;
        if batch.encoded_len() != bytes.len() {
            return Err(TierError::corruption(
                ectx,
                format!(
                    "stream {key} entry {} holds {} bytes after its {}-byte batch",
                    self.id,
                    bytes.len() - batch.encoded_len(),
                    batch.encoded_len()
                ),
            ));
        }
        match parse_entry_id(&self.id) {
            Some(base) if base == batch.base_offset() => Ok(batch),
            _ => Err(TierError::corruption(
                ectx,
                format!(
                    "stream {key} entry {} holds a batch with base offset {} (expected ID {})",
                    self.id,
                    batch.base_offset(),
                    entry_id(batch.base_offset())
                ),
            )),
        }
    }
}

fn entry_ctx(ctx: &ErrorContext, key: &str, id: &str) -> ErrorContext {
    ctx.clone().location(format!("{key}@{id}"))
}
