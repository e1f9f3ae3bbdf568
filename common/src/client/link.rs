//! One persistent connection to the storage node: its handshake, the tasks
//! that read and write its control stream, the requests waiting on it, and
//! reconnection with backoff when it drops.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use super::call::{Outcome, Reply};
use super::{ClientError, Shared, Welcome};
use crate::frame::FrameDecoder;
use crate::message::{
    self, Hello, PROTOCOL_VERSION, Request, RequestBody, ResponseBody, Role, WireError,
};

/// Bytes of each thread's encoding scratch space.
const SCRATCH_BYTES: usize = 64 << 10;

thread_local! {
    /// Encoding scratch space, reused by every request a thread sends.
    static SCRATCH: RefCell<BytesMut> = RefCell::new(BytesMut::with_capacity(SCRATCH_BYTES));
}

/// Encodes a frame whose blob is the concatenation of `parts`. Frames that
/// fit the calling thread's scratch space are carved out of it; a larger
/// one gets a buffer of its own, so the scratch space never grows to the
/// largest value a thread ever sent.
pub(crate) fn encode_frame<T: serde::Serialize>(meta: &T, parts: &[&[u8]]) -> Bytes {
    let blob_len: usize = parts.iter().map(|p| p.len()).sum();
    if blob_len > SCRATCH_BYTES / 2 {
        return message::encode_parts(&mut BytesMut::new(), meta, parts);
    }
    SCRATCH.with(|scratch| message::encode_parts(&mut scratch.borrow_mut(), meta, parts))
}

struct Pending {
    tx: oneshot::Sender<Outcome>,
    deadline: Instant,
}

/// The requests waiting on a connection, by id. Ids grow with time and
/// every request gets the same timeout, so the oldest deadline is first.
#[derive(Default)]
struct Waiting {
    by_id: BTreeMap<u64, Pending>,
    /// Set (under the same lock) when the connection is lost: from then on
    /// nothing is registered, so no request can be left behind unanswered.
    closed: bool,
}

/// A connection that is up, with the tasks serving its control stream.
pub(crate) struct Live {
    pub(crate) conn: quinn::Connection,
    outbox: mpsc::UnboundedSender<Bytes>,
    waiting: Mutex<Waiting>,
    /// Mirrors `waiting.closed`, for checks that need no lock.
    dead: AtomicBool,
}

impl Live {
    /// Fails every waiting request with `err` and refuses new ones.
    fn fail_all(&self, err: &ClientError) {
        let drained = {
            let mut waiting = self.waiting.lock();
            waiting.closed = true;
            self.dead.store(true, Ordering::Release);
            std::mem::take(&mut waiting.by_id)
        };
        for pending in drained.into_values() {
            let _ = pending.tx.send(Err(err.clone()));
        }
    }

    /// Fails the requests whose deadline has passed, and then closes the
    /// connection: a storage node that answers nothing within the deadline
    /// may be gone (killed, or restarted at another address), and the link
    /// reconnects, resolving the address again, rather than waiting for the
    /// idle timeout.
    pub(crate) fn expire(&self, now: Instant, timeout: Duration) {
        let mut waiting = self.waiting.lock();
        let mut any = false;
        while let Some(entry) = waiting.by_id.first_entry() {
            if entry.get().deadline > now {
                break;
            }
            let _ = entry.remove().tx.send(Err(ClientError::DeadlineExceeded {
                after_ms: timeout.as_millis() as u64,
            }));
            any = true;
        }
        drop(waiting);
        if any {
            self.conn.close(0u32.into(), b"request deadline passed");
        }
    }

    /// Registers request `id` and queues its frame. Either the request is
    /// registered before the connection is declared lost (and is then
    /// answered, failed with the loss, or failed at its deadline), or it is
    /// refused here.
    pub(crate) fn send(
        &self,
        id: u64,
        frame: Bytes,
        deadline: Instant,
    ) -> Result<oneshot::Receiver<Outcome>, ClientError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut waiting = self.waiting.lock();
            if waiting.closed {
                return Err(ClientError::ConnectionLost {
                    reason: "the connection is closing".into(),
                });
            }
            waiting.by_id.insert(id, Pending { tx, deadline });
        }
        if self.outbox.send(frame).is_err() {
            self.waiting.lock().by_id.remove(&id);
            return Err(ClientError::ConnectionLost {
                reason: "the connection's writer stopped".into(),
            });
        }
        Ok(rx)
    }
}

/// One of the client's persistent connections.
pub(crate) struct Link {
    live: Mutex<Option<Arc<Live>>>,
    /// Incremented each time the link comes up again after a loss.
    pub(crate) generation: AtomicU64,
    reconnecting: AtomicBool,
}

impl Link {
    pub(crate) fn new(live: Arc<Live>) -> Self {
        Self {
            live: Mutex::new(Some(live)),
            generation: AtomicU64::new(0),
            reconnecting: AtomicBool::new(false),
        }
    }

    /// The live connection, if the link is up.
    pub(crate) fn live(&self) -> Option<Arc<Live>> {
        self.live
            .lock()
            .as_ref()
            .filter(|l| !l.dead.load(Ordering::Acquire))
            .cloned()
    }

    pub(crate) fn is_up(&self) -> bool {
        self.live().is_some()
    }

    /// Closes the connection (on client shutdown).
    pub(crate) fn close(&self) {
        if let Some(live) = self.live.lock().take() {
            live.conn.close(0u32.into(), b"client closing");
            live.fail_all(&ClientError::ShutDown);
        }
    }
}

/// The role a link presents in its `Hello`.
fn role_for(shared: &Shared, index: usize) -> Role {
    if shared.config.writer {
        Role::Writer {
            partition: index as u32,
            epoch: shared.epoch_for_hello(),
        }
    } else {
        Role::Reader
    }
}

/// Opens a connection, runs the handshake, and starts the tasks that serve
/// its control stream.
pub(crate) async fn establish(
    shared: &Arc<Shared>,
    index: usize,
) -> Result<(Arc<Live>, Welcome), ClientError> {
    let connect_timeout = Duration::from_millis(shared.config.connect_timeout_ms);
    let attempt = async {
        let addr = shared.resolve().await?;
        let connecting = shared
            .endpoint
            .connect_with(shared.quic.clone(), addr, &shared.server_name)
            .map_err(|e| ClientError::Connect {
                server: shared.config.server.clone(),
                reason: e.to_string(),
            })?;
        let conn = connecting.await.map_err(|e| connection_error(shared, &e))?;
        let (mut send, mut recv) = conn
            .open_bi()
            .await
            .map_err(|e| connection_error(shared, &e))?;
        let hello = Request {
            id: 0,
            body: RequestBody::Hello(Hello {
                protocol: PROTOCOL_VERSION,
                role: role_for(shared, index),
            }),
        };
        send.write_all(&encode_frame(&hello, &[]))
            .await
            .map_err(|e| write_error(shared, e))?;
        let mut decoder = FrameDecoder::trusting(shared.response_limit_bytes);
        let welcome = loop {
            let chunk = recv
                .read_chunk(1 << 20, true)
                .await
                .map_err(|e| read_error(shared, e))?
                .ok_or_else(|| {
                    ClientError::Protocol(
                        "the storage node closed the stream during the handshake".into(),
                    )
                })?;
            decoder
                .push(&chunk.bytes)
                .map_err(|e| ClientError::Protocol(e.to_string()))?;
            if let Some(frame) = decoder
                .next_frame()
                .map_err(|e| ClientError::Protocol(e.to_string()))?
            {
                let response = message::decode_response(&frame)
                    .map_err(|e| ClientError::Protocol(e.to_string()))?;
                match response.body {
                    Ok(ResponseBody::Welcome {
                        partitions,
                        epoch,
                        max_key_bytes,
                        max_value_bytes,
                        io_engine,
                    }) => {
                        break Welcome {
                            partitions: partitions as usize,
                            epoch,
                            max_key_bytes: max_key_bytes as usize,
                            max_value_bytes: max_value_bytes as usize,
                            io_engine,
                        };
                    }
                    Ok(other) => return Err(super::call::unexpected(&other)),
                    Err(wire) => return Err(ClientError::Storage(wire)),
                }
            }
        };
        let (outbox, rx) = mpsc::unbounded_channel();
        let live = Arc::new(Live {
            conn: conn.clone(),
            outbox,
            waiting: Mutex::new(Waiting::default()),
            dead: AtomicBool::new(false),
        });
        tokio::spawn(write_loop(send, rx));
        tokio::spawn(read_loop(
            Arc::clone(shared),
            index,
            Arc::clone(&live),
            recv,
            decoder,
        ));
        Ok((live, welcome))
    };
    tokio::time::timeout(connect_timeout, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(ClientError::Connect {
                server: shared.config.server.clone(),
                reason: format!("no answer within {} ms", connect_timeout.as_millis()),
            })
        })
}

/// Sends queued frames, several per write when they pile up.
async fn write_loop(mut send: quinn::SendStream, mut rx: mpsc::UnboundedReceiver<Bytes>) {
    let mut batch = Vec::with_capacity(64);
    while rx.recv_many(&mut batch, 64).await > 0 {
        if send.write_all_chunks(&mut batch).await.is_err() {
            return;
        }
        batch.clear();
    }
    let _ = send.finish();
}

/// Delivers responses to their requests until the stream ends, then fails
/// whatever is still waiting and starts reconnecting.
async fn read_loop(
    shared: Arc<Shared>,
    index: usize,
    live: Arc<Live>,
    mut recv: quinn::RecvStream,
    mut decoder: FrameDecoder,
) {
    let reason = loop {
        let chunk = match recv.read_chunk(1 << 20, true).await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break "the storage node closed the control stream".to_string(),
            Err(e) => {
                break match read_error(&shared, e) {
                    ClientError::ConnectionLost { reason } => reason,
                    other => other.to_string(),
                };
            }
        };
        if let Err(e) = decoder.push(&chunk.bytes) {
            break format!("malformed response stream: {e}");
        }
        let mut failed = None;
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => match message::decode_response(&frame) {
                    Ok(response) => {
                        let waiting = live.waiting.lock().by_id.remove(&response.id);
                        if let Some(waiting) = waiting {
                            let outcome = response.body.map(|body| Reply {
                                body,
                                blob: frame.blob,
                            });
                            let _ = waiting.tx.send(Ok(outcome));
                        }
                    }
                    Err(e) => {
                        failed = Some(format!("undecodable response: {e}"));
                        break;
                    }
                },
                Ok(None) => break,
                Err(e) => {
                    failed = Some(format!("malformed response stream: {e}"));
                    break;
                }
            }
        }
        if let Some(reason) = failed {
            break reason;
        }
    };
    live.conn.close(0u32.into(), b"control stream ended");
    if shared.closing.load(Ordering::Acquire) {
        live.fail_all(&ClientError::ShutDown);
        return;
    }
    tracing::warn!(
        link = index,
        "lost the connection to the storage node ({reason}); reconnecting"
    );
    live.fail_all(&ClientError::ConnectionLost { reason });
    start_reconnect(shared, index);
}

/// Reconnects link `index` in the background with exponential backoff
/// (50 ms doubling to 2 s) until it succeeds, the writer is fenced, or the
/// client closes.
pub(crate) fn start_reconnect(shared: Arc<Shared>, index: usize) {
    // Before the client has all its links (while connecting), there is
    // nothing to reconnect yet: `connect` starts it once they are in place.
    let Some(link) = shared.links().get(index).cloned() else {
        return;
    };
    if link.reconnecting.swap(true, Ordering::AcqRel) {
        return;
    }
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(50);
        loop {
            if shared.closing.load(Ordering::Acquire) {
                break;
            }
            tokio::time::sleep(backoff).await;
            match establish(&shared, index).await {
                Ok((live, welcome)) => {
                    *link.live.lock() = Some(live);
                    link.generation.fetch_add(1, Ordering::AcqRel);
                    tracing::info!(
                        link = index,
                        epoch = welcome.epoch,
                        "reconnected to the storage node"
                    );
                    if let Some(hook) = &shared.config.on_reconnect {
                        hook(index);
                    }
                    break;
                }
                Err(ClientError::Storage(WireError::Fenced { yours, current })) => {
                    tracing::error!(
                        link = index,
                        "fenced by a newer writer (epoch {current} > {yours}); not reconnecting"
                    );
                    shared.fenced.store(true, Ordering::Release);
                    break;
                }
                Err(e) => {
                    tracing::debug!(link = index, "reconnect failed: {e}");
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
        link.reconnecting.store(false, Ordering::Release);
    });
}

/// Classifies a connection failure; a refusal of our certificate gets a
/// message that says so.
pub(crate) fn connection_error(shared: &Shared, e: &quinn::ConnectionError) -> ClientError {
    let refusal = match e {
        quinn::ConnectionError::ConnectionClosed(close) if is_tls_alert(close.error_code) => {
            Some(String::from_utf8_lossy(&close.reason).into_owned())
        }
        quinn::ConnectionError::TransportError(t) if is_tls_alert(t.code) => Some(t.to_string()),
        _ => None,
    };
    match refusal {
        Some(reason) => ClientError::Refused {
            server: shared.config.server.clone(),
            reason,
        },
        None => ClientError::ConnectionLost {
            reason: e.to_string(),
        },
    }
}

/// True if `code` is a QUIC CRYPTO_ERROR, which carries a TLS alert
/// (0x0100 + alert, RFC 9001 §4.8).
fn is_tls_alert(code: quinn::TransportErrorCode) -> bool {
    (0x100..0x200).contains(&u64::from(code))
}

pub(crate) fn read_error(shared: &Shared, e: quinn::ReadError) -> ClientError {
    match e {
        quinn::ReadError::ConnectionLost(c) => connection_error(shared, &c),
        other => ClientError::ConnectionLost {
            reason: other.to_string(),
        },
    }
}

pub(crate) fn write_error(shared: &Shared, e: quinn::WriteError) -> ClientError {
    match e {
        quinn::WriteError::ConnectionLost(c) => connection_error(shared, &c),
        other => ClientError::ConnectionLost {
            reason: other.to_string(),
        },
    }
}
