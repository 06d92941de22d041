//! [`LinkProxy`]: a TCP proxy a replica's replication link runs through, which a test
//! can cut to model a network partition between a primary and its replica.

use std::net::Ipv4Addr;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{
        TcpListener, TcpStream,
        tcp::{OwnedReadHalf, OwnedWriteHalf},
    },
    sync::watch,
    task::{JoinHandle, JoinSet},
};

use super::HarnessError;

/// Forwards every connection accepted on its 127.0.0.1 port to `127.0.0.1:<target>`,
/// byte for byte in both directions, while the link is up.
///
/// While the link is [cut](Self::cut), nothing read from either side after the cut is
/// written to the other, and no end of stream is passed on: both sides keep an open
/// connection that carries nothing, as in a partition TCP has not noticed yet (the
/// primary still counts the replica as connected; the replica receives none of the
/// primary's writes and the primary none of the replica's acknowledgements). Data
/// held back is written when the link is [restored](Self::restore), in order.
///
/// The proxy runs on the Tokio runtime that started it; dropping it stops it and closes
/// its connections.
#[derive(Debug)]
pub(crate) struct LinkProxy {
    port: u16,
    up: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl LinkProxy {
    /// Listens on a free 127.0.0.1 port, forwarding to `127.0.0.1:<target>`.
    pub(crate) async fn start(target: u16) -> Result<Self, HarnessError> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|e| HarnessError::io("binding the replication link proxy", e))?;
        let port =
            listener.local_addr().map_err(|e| HarnessError::io("reading the proxy's address", e))?.port();
        let (up, _) = watch::channel(true);
        let gate = up.clone();
        let accept = tokio::spawn(async move {
            // Owned here: dropped (and every connection task aborted) with this task.
            let mut connections = JoinSet::new();
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = TcpStream::connect((Ipv4Addr::LOCALHOST, target)).await else {
                    // The target is down: the inbound side sees the connection close.
                    continue;
                };
                let (in_read, in_write) = inbound.into_split();
                let (out_read, out_write) = outbound.into_split();
                connections.spawn(pump(in_read, out_write, gate.subscribe()));
                connections.spawn(pump(out_read, in_write, gate.subscribe()));
                // Reap the finished ones so the set does not grow without bound.
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(Self { port, up, accept })
    }

    /// The port the proxy listens on.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Stops forwarding: from now on nothing read from either side reaches the other.
    pub(crate) fn cut(&self) {
        self.up.send_replace(false);
    }

    /// Forwards again, starting with what was held back.
    pub(crate) fn restore(&self) {
        self.up.send_replace(true);
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copies `from` to `to`, holding each chunk (and the end of stream) while the link is cut.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut up: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        // Checked after the read: a chunk that arrives after the cut is held, even when
        // the read was already waiting when the link was cut.
        if up.wait_for(|up| *up).await.is_err() {
            return;
        }
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
