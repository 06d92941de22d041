//! Reads at and beyond a topic's end over the HTTP API: beyond it is an error naming the
//! next offset (what `tierlog consume --from N` says), at it an empty read, or with
//! `follow` a read that waits for the next record.

use futures::StreamExt;
use tierlog_api::ApiError;
use tierlog_client::{Client, ErrorKind, NewRecordJson, Start};

use crate::support::{serve, workdir};
use crate::within;

#[tokio::test]
async fn a_read_beyond_the_end_is_an_error_naming_the_next_offset() {
    let dir = workdir();
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    let records = (0..10).map(|i| NewRecordJson::new(format!("r{i}").as_str())).collect();
    assert_eq!(client.append("ten", records).await.expect("append").end, 10);
    let http = reqwest::Client::new();
    let url = format!("{}/v1/topics/ten/records", server.url);

    for query in ["from=11", "from=offset:11", "from=11&follow=true", "from=11&format=lines"] {
        let response = http.get(format!("{url}?{query}")).send().await.expect("request");
        let status = response.status().as_u16();
        let start = response.headers().get("x-tierlog-start").cloned();
        let body = response.text().await.expect("body");
        assert_eq!(
            status, 404,
            "{query}: a read beyond the end is refused (x-tierlog-start {start:?}): {body:?}"
        );
        let error: ApiError = serde_json::from_str(&body).expect("an error body");
        assert_eq!(error.kind(), ErrorKind::Trimmed, "{query}: {body}");
        assert!(
            error.error.message.contains("offset 11 is beyond the end of topic ten (the next offset is 10)"),
            "{query}: {body}"
        );
    }
    let err = client.read_with("ten", Start::Offset(11), false, None).await.err().expect("refused");
    assert_eq!(err.kind(), Some(ErrorKind::Trimmed), "{err}");

    // At the end: an empty read without follow.
    let response = http.get(format!("{url}?from=10")).send().await.expect("request");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["x-tierlog-start"], "10");
    assert_eq!(response.headers()["x-tierlog-end"], "10");
    assert_eq!(response.text().await.expect("body"), "");
    // At the end with follow: the read waits for the next record.
    let mut follow =
        client.read_with("ten", Start::Offset(10), true, Some(1)).await.expect("a follow from the end");
    client.append("ten", vec![NewRecordJson::new("eleventh")]).await.expect("append");
    let record = within("the followed record", follow.next()).await.expect("a record").expect("a record");
    assert_eq!((record.offset, &record.payload[..]), (10, &b"eleventh"[..]));
    assert!(server.terminate().success());
}
