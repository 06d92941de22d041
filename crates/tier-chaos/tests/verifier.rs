//! The verifier must catch what the chaos scenarios look for: a record missing from its
//! acknowledged offset, a duplicate, and accept a clean log.

use tier_chaos::{
    ack::Ack,
    payload::{RecordId, encode},
    verify::verify_topic,
};
use tier_router::{NewRecord, StoreConfig, TieredStore};

fn records(writer: u64, seqs: std::ops::Range<u64>) -> Vec<NewRecord> {
    seqs.map(|seq| NewRecord::new(1, encode(RecordId { writer, seq }))).collect()
}

#[tokio::test]
async fn verifier_accepts_a_clean_log_and_catches_loss_and_duplicates() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TieredStore::open(StoreConfig::hot_only(dir.path().join("hot"))).await.expect("open");
    let topic = store.topic("verify-me").await.expect("topic");
    let first = topic.append(records(1, 0..5)).await.expect("append");
    let second = topic.append(records(1, 5..8)).await.expect("append");
    let acks =
        vec![Ack { range: first, writer: 1, first_seq: 0 }, Ack { range: second, writer: 1, first_seq: 5 }];

    let clean = verify_topic(&topic, &acks, 0, &[]).await.expect("verify");
    assert!(clean.is_clean(), "{clean:?}");
    assert_eq!((clean.acked, clean.read), (8, 8));

    // An acknowledgement the log does not back: offsets 5..8 claimed by another writer.
    let mut wrong = acks.clone();
    wrong[1].writer = 2;
    let lost = verify_topic(&topic, &wrong, 0, &[]).await.expect("verify");
    assert_eq!(lost.lost, 3, "{lost:?}");

    // The same record written twice.
    let again = topic.append(records(1, 7..8)).await.expect("append");
    assert_eq!(again.start, 8);
    let dup = verify_topic(&topic, &acks, 0, &[]).await.expect("verify");
    assert_eq!(dup.duplicated, 1, "{dup:?}");
    assert_eq!(dup.lost, 0);

    // An excused (reported) loss is skipped, not read and not counted.
    let excused = verify_topic(&topic, &acks, 0, &[first]).await.expect("verify");
    assert_eq!((excused.acked, excused.lost), (3, 0), "{excused:?}");
    store.close().await;
}
