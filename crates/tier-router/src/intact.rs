//! [`read_intact`]: the longest intact answer of a read that meets damage, for every
//! reader of a tier through [`Tier::read`](tier_core::Tier::read) or a batch read.

use std::future::Future;

use tier_core::{ErrorKind, Offset, TierError};

/// Reads `[n, to)` from the WAL (or any tier read through [`Tier::read`], as
/// [`paged_records`](crate::paged_records) does) through `read`, which reads `[n, end)`
/// for the `end` it is given (`n < to`). When the tier answers `Corruption` (a damaged
/// batch inside what the read would return), returns instead the longest answer it
/// still gives intact:
/// the records or batches before the damaged batch, found by asking for reads ending
/// closer to `n` (galloping from `n + 1`, then bisecting; a read stops decoding at its
/// end, so a read ending before the damaged batch never touches it). When even
/// `[n, n + 1)` is damaged, the `Corruption`: the caller serves `n` from another tier
/// ([`instead_of_wal`]) or ends the read with it.
pub(crate) async fn read_intact<T, F, Fut>(n: Offset, to: Offset, mut read: F) -> Result<Vec<T>, TierError>
where
    F: FnMut(Offset) -> Fut,
    Fut: Future<Output = Result<Vec<T>, TierError>>,
{
    let damage = match read(to).await {
        Err(e) if e.kind() == ErrorKind::Corruption => e,
        answer => return answer,
    };
    // Reads ending at `lo` succeed (`good` is the answer of the last one), reads ending
    // at `hi` fail.
    let (mut lo, mut hi, mut good) = (n, to, None);
    let mut step: u64 = 1;
    while n.saturating_add(step) < hi {
        let end = n + step;
        match read(end).await {
            Ok(answer) => (lo, good, step) = (end, Some(answer), step.saturating_mul(2)),
            Err(e) if e.kind() == ErrorKind::Corruption => {
                hi = end;
                break;
            }
            Err(e) => return Err(e),
        }
    }
    while hi - lo > 1 {
        let end = lo + (hi - lo) / 2;
        match read(end).await {
            Ok(answer) => (lo, good) = (end, Some(answer)),
            Err(e) if e.kind() == ErrorKind::Corruption => hi = end,
            Err(e) => return Err(e),
        }
    }
    match good {
        Some(answer) if !answer.is_empty() => Ok(answer),
        _ => Err(damage),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use tier_core::{ErrorContext, TierKind};

    use super::*;

    /// A WAL holding `[0, 1000)` whose batch `[b, b + 10)` is damaged: a read `[n, end)`
    /// fails when it reaches that batch, else answers its offsets. Counts the reads.
    async fn damaged_at(b: Offset, n: Offset, to: Offset) -> (Result<Vec<Offset>, TierError>, u32) {
        let reads = Cell::new(0);
        let answer = read_intact(n, to, |end| {
            reads.set(reads.get() + 1);
            let reaches = n < b + 10 && end > b;
            async move {
                if reaches {
                    Err(TierError::corruption(ErrorContext::tier(TierKind::Hot), "CRC mismatch"))
                } else {
                    Ok((n..end).collect())
                }
            }
        })
        .await;
        (answer, reads.get())
    }

    #[tokio::test]
    async fn an_intact_read_is_one_read() {
        let (answer, reads) = damaged_at(500, 0, 400).await;
        assert_eq!(answer.expect("intact"), (0..400).collect::<Vec<_>>());
        assert_eq!(reads, 1);
    }

    #[tokio::test]
    async fn a_damaged_read_answers_the_offsets_before_the_damaged_batch_in_few_reads() {
        for (b, n) in [(1, 0), (200, 0), (999 - 9, 3), (500, 499)] {
            let (answer, reads) = damaged_at(b, n, 1000).await;
            assert_eq!(answer.expect("the intact prefix"), (n..b).collect::<Vec<_>>(), "damage at {b}");
            assert!(reads <= 2 + 2 * 10, "{reads} reads for damage at {b}");
        }
    }

    #[tokio::test]
    async fn a_read_starting_in_the_damaged_batch_is_its_corruption() {
        for n in [200, 205, 209] {
            let (answer, reads) = damaged_at(200, n, 1000).await;
            assert_eq!(answer.expect_err("damaged").kind(), ErrorKind::Corruption);
            assert_eq!(reads, 2, "the read, then [n, n + 1)");
        }
    }

    #[tokio::test]
    async fn other_errors_are_not_narrowed() {
        let reads = Cell::new(0);
        let answer: Result<Vec<Offset>, _> = read_intact(0, 100, |_| {
            reads.set(reads.get() + 1);
            async { Err(TierError::unavailable(ErrorContext::tier(TierKind::Hot), "disk gone")) }
        })
        .await;
        assert_eq!(answer.expect_err("unavailable").kind(), ErrorKind::Unavailable);
        assert_eq!(reads.get(), 1);
    }
}
