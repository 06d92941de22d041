//! The [`Tier`] implementation: one segment object per appended batch.
//!
//! `Ok` from `append` must mean durable in this tier (invariant 4), so `append` seals the
//! batch into a segment of its own and uploads it before returning; no batch is ever
//! buffered. This suits tests and light use; production data reaches the cold tier as
//! whole sealed WAL segments through [`ColdTier::export_segment`].

use async_trait::async_trait;
use bytes::Bytes;
use tier_core::segment::{SegmentHeader, SegmentWriter, Trailer};
use tier_core::{Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, Timestamp, TopicName};

use crate::ColdTier;
use crate::error::{key_ctx, topic_ctx};
use crate::export::{Content, Fingerprint};
use crate::layout::TimeBounds;
use crate::listing::SegmentObject;

impl ColdTier {
    /// The sealed one-batch segment `append` uploads. Deterministic (its creation time
    /// is the batch's first timestamp), so a retried append produces identical bytes.
    fn segment_of(&self, topic: &TopicName, batch: &RecordBatch) -> Result<Bytes, TierError> {
        let header = SegmentHeader::new(topic.clone(), batch.base_offset(), batch.first_timestamp())
            .with_index_interval_bytes(self.config.index_interval_bytes);
        let with_ctx = |mut e: TierError| {
            let c = e.context_mut();
            c.tier = Some(TierKind::Cold);
            c.topic = Some(topic.clone());
            e
        };
        let mut writer = SegmentWriter::new(Vec::new(), &header).map_err(with_ctx)?;
        writer.append(batch).map_err(with_ctx)?;
        Ok(Bytes::from(writer.seal().map_err(with_ctx)?))
    }

    /// An append at offsets already held: `Ok` when a held batch starts at the same
    /// offset with the same bytes, `Fenced` otherwise (invariant 5). Reads the index
    /// interval holding the batch's base offset and walks its batches.
    async fn check_reappend(
        &self,
        topic: &TopicName,
        batch: &RecordBatch,
        held: OffsetRange,
    ) -> Result<(), TierError> {
        let base = batch.base_offset();
        let ctx = topic_ctx(topic).offset(base);
        let listing = self.listing(topic).await?;
        let segment = match listing.find(base) {
            Ok(i) => listing.segments()[i].clone(),
            Err(after) => return Err(crate::gap::gap_error(topic, &listing, base, after)),
        };
        let ranged = self.open_segment(topic, &segment).await?;
        let fenced = |why: &str| TierError::fenced(ctx.clone(), format!("{why} (held offsets {held:?})"));
        let Some(range) = ranged.locate_offset(base) else {
            return Err(fenced("no held batch starts at this offset"));
        };
        let data = ranged.fetch(&range).await?;
        let mut pos = 0usize;
        while pos < data.len() {
            let held_batch = RecordBatch::decode(&data.slice(pos..)).map_err(|e| {
                e.shifted(range.bytes.start + pos as u64)
                    .into_tier_error(key_ctx(topic, &segment.key).offset(base))
            })?;
            if held_batch.base_offset() == base {
                if held_batch.to_bytes() == batch.to_bytes() {
                    return Ok(());
                }
                return Err(fenced("a different batch is already held at this offset"));
            }
            if held_batch.base_offset() > base {
                break;
            }
            pos += held_batch.encoded_len();
        }
        Err(fenced("the batch starts inside a held batch"))
    }
}

#[async_trait]
impl Tier for ColdTier {
    fn kind(&self) -> TierKind {
        TierKind::Cold
    }

    fn capabilities(&self) -> tier_core::Capabilities {
        tier_core::Capabilities::none().with_idempotent_append(true)
    }

    /// From the first segment's base offset to the last segment's end, from the cached
    /// manifest (listed on first use; [`ColdTier::refresh`] lists again). Missing
    /// objects inside are reported by [`ColdTier::gaps`], offsets declared lost by
    /// [`ColdTier::recorded_gaps`] (a recorded gap after the last segment is not part
    /// of the range until a segment follows it).
    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        Ok(self.listing(topic).await?.range())
    }

    /// Seals `batch` into a segment object of its own and uploads it with a conditional
    /// PUT before returning (see the module docs).
    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        let state = self.topic_state(topic);
        let _guard = state.append_lock.lock().await;
        let listing = self.listing(topic).await?;
        let held = listing.range();
        let base = batch.base_offset();
        let ctx = topic_ctx(topic).offset(base);
        if let Some(gap) = listing.recorded_gap_at(base) {
            return Err(TierError::invalid(
                ctx,
                format!("batch at {base} is inside the recorded gap {} ({})", gap.range, gap.key),
            ));
        }
        let continuation = listing.continuation();
        if !held.is_empty() && base < held.start {
            return Err(TierError::invalid(
                ctx,
                format!("batch at {base} is below the held offsets {held:?}"),
            ));
        }
        if !held.is_empty() && base < held.end {
            return self.check_reappend(topic, &batch, held).await;
        }
        if !held.is_empty() && base != continuation {
            return Err(TierError::invalid(
                ctx,
                format!("batch at {base} does not continue the log at {continuation}"),
            ));
        }
        let data = self.segment_of(topic, &batch)?;
        let range = OffsetRange::new(base, batch.end_offset());
        let key = self.layout.segment_key(topic, range);
        let len = data.len() as u64;
        // The bounds the trailer just written holds (what `meta` will compare against).
        let trailer =
            Trailer::decode(&data[data.len() - tier_core::segment::TRAILER_LEN..]).map_err(|e| {
                TierError::internal(key_ctx(topic, &key), "decoding our own trailer").with_source(e)
            })?;
        let bounds = TimeBounds { min: trailer.min_timestamp, max: trailer.max_timestamp };
        if !self.put_create(topic, &key, data.clone()).await? {
            let fingerprint = Fingerprint { len, content: Content::Whole(data) };
            if !self.existing_matches(topic, &key, &fingerprint).await? {
                return Err(TierError::fenced(
                    key_ctx(topic, &key),
                    "the object vanished while being compared",
                ));
            }
        }
        // The batch is durable; a missing pointer only matters to a listing that lags.
        let from = Self::pointer_from(&listing, base);
        if let Err(e) = self.put_pointer(topic, from, &crate::layout::segment_file_name(range)).await {
            tracing::warn!(error = %e.report(), "writing a successor pointer failed; a lagging listing may miss the batch");
        }
        // A missing marker only costs a later lookup a trailer read.
        if let Err(e) = self.put_marker(topic, range, bounds).await {
            tracing::warn!(error = %e.report(), "writing a time marker failed; timestamp lookups will read the trailer");
        }
        self.note_segment(topic, SegmentObject::with_bounds(key, range, len, Some(bounds)))
    }

    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        crate::metrics::read_request();
        self.read_stored_batches(topic, from, to, max_bytes).await
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        self.lookup_timestamp(topic, timestamp).await
    }
}
