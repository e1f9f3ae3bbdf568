//! One persistent connection to the storage node: its handshake, the tasks
//! that read and write its control stream, the requests waiting on it, and
//! reconnection with backoff when it drops.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::futures::Notified;
use tokio::sync::{Notify, mpsc, oneshot};

use super::call::{Outcome, Reply};
use super::{ClientError, ClientState, LinkEvent, Welcome};
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

/// A request waiting for its answer, until its deadline.
struct PendingRequest {
    tx: oneshot::Sender<Outcome>,
    deadline: Instant,
}

/// The requests waiting on a connection, by id. Ids grow with time and
/// every request gets the same timeout, so the oldest deadline is first.
#[derive(Default)]
struct PendingRequests {
    by_id: BTreeMap<u64, PendingRequest>,
    /// Set (under the same lock) when the connection is lost: from then on
    /// nothing is registered, so no request can be left behind unanswered.
    closed: bool,
}

/// The bytes queued in a connection's outbox and who waits for room
/// there, shared by the connection and its writer task.
#[derive(Default)]
struct Room {
    /// Bytes handed to the outbox and not yet written to the stream.
    queued_bytes: AtomicUsize,
    /// The largest frame refused for want of bytes since the outbox last
    /// drained: room is room for it.
    wanted_bytes: AtomicUsize,
    /// Callers in [`Live::wait_for_room`]; room is announced only when
    /// there are some.
    waiters: AtomicUsize,
    made: Notify,
}

impl Room {
    /// Returns `len` queued bytes (written, or never queued) and wakes who
    /// waits for room.
    fn release_bytes(&self, len: usize) {
        if self.queued_bytes.fetch_sub(len, Ordering::SeqCst) == len {
            self.wanted_bytes.store(0, Ordering::SeqCst);
        }
        self.announce();
    }

    /// True if a frame of the largest size refused so far would be queued.
    fn has_room_for_bytes(&self, outbox_bytes: usize) -> bool {
        let queued = self.queued_bytes.load(Ordering::SeqCst);
        let wanted = self.wanted_bytes.load(Ordering::SeqCst).max(1);
        queued == 0 || queued + wanted <= outbox_bytes
    }

    /// Wakes who waits for room, if anyone does.
    fn announce(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.made.notify_waiters();
        }
    }
}

/// Counts a caller in [`Room::waiters`] while it waits, also when its wait
/// is cancelled.
struct RoomWaiter<'a>(&'a Room);

impl<'a> RoomWaiter<'a> {
    fn new(room: &'a Room) -> Self {
        room.waiters.fetch_add(1, Ordering::SeqCst);
        Self(room)
    }
}

impl Drop for RoomWaiter<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A connection that is up, with the tasks serving its control stream.
pub(crate) struct Live {
    pub(crate) conn: quinn::Connection,
    /// Frames for the writer task; at most `max_in_flight_requests` frames
    /// and, through `room`, `outbox_bytes` bytes.
    outbox: mpsc::Sender<Bytes>,
    outbox_bytes: usize,
    max_in_flight_requests: usize,
    room: Arc<Room>,
    waiting: Mutex<PendingRequests>,
    /// Mirrors `waiting.closed`, for checks that need no lock.
    dead: AtomicBool,
    /// Set when a new connection took this one's place (a reader's links
    /// reopened as a writer's): its end starts no reconnection.
    retired: AtomicBool,
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
        self.room.announce();
        for pending in drained.into_values() {
            let _ = pending.tx.send(Err(err.clone()));
        }
    }

    /// Fails each request whose deadline has passed with
    /// [`ClientError::DeadlineExceeded`], alone: the connection and the
    /// other requests on it carry on. (A peer that is gone is noticed by
    /// QUIC's idle timeout, which keep-alives hold off while it answers.)
    pub(crate) fn expire(&self, now: Instant, timeout: Duration) {
        let mut expired = Vec::new();
        {
            let mut waiting = self.waiting.lock();
            while let Some(entry) = waiting.by_id.first_entry() {
                if entry.get().deadline > now {
                    break;
                }
                expired.push(entry.remove());
            }
        }
        if expired.is_empty() {
            return;
        }
        self.room.announce();
        let after_ms = timeout.as_millis() as u64;
        for pending in expired {
            let _ = pending
                .tx
                .send(Err(ClientError::DeadlineExceeded { after_ms }));
        }
    }

    /// Registers request `id` and queues its frame. Either the request is
    /// registered before the connection is declared lost (and is then
    /// answered, failed with the loss, or failed at its deadline), or it is
    /// refused here: [`ClientError::Busy`] when the connection holds
    /// `max_in_flight_requests` requests or `outbox_bytes` queued bytes
    /// already, [`ClientError::ConnectionLost`] when it is closing.
    pub(crate) fn send(
        &self,
        partition: usize,
        id: u64,
        frame: Bytes,
        deadline: Instant,
    ) -> Result<oneshot::Receiver<Outcome>, ClientError> {
        let len = frame.len();
        let queued = self.room.queued_bytes.fetch_add(len, Ordering::SeqCst);
        if queued > 0 && queued + len > self.outbox_bytes {
            self.room.wanted_bytes.fetch_max(len, Ordering::SeqCst);
            self.room.release_bytes(len);
            return Err(ClientError::Busy {
                partition,
                full: "outbox_bytes",
            });
        }
        let (tx, rx) = oneshot::channel();
        let refused = {
            let mut waiting = self.waiting.lock();
            if waiting.closed {
                Some(ClientError::ConnectionLost {
                    reason: "the connection is closing".into(),
                })
            } else if waiting.by_id.len() >= self.max_in_flight_requests {
                Some(ClientError::Busy {
                    partition,
                    full: "max_in_flight_requests",
                })
            } else {
                waiting.by_id.insert(id, PendingRequest { tx, deadline });
                None
            }
        };
        if let Some(refused) = refused {
            self.room.release_bytes(len);
            return Err(refused);
        }
        let refused = match self.outbox.try_send(frame) {
            Ok(()) => return Ok(rx),
            // Frames of requests that passed their deadline before being
            // written still fill the outbox.
            Err(mpsc::error::TrySendError::Full(_)) => ClientError::Busy {
                partition,
                full: "max_in_flight_requests",
            },
            Err(mpsc::error::TrySendError::Closed(_)) => ClientError::ConnectionLost {
                reason: "the connection's writer stopped".into(),
            },
        };
        self.waiting.lock().by_id.remove(&id);
        self.room.release_bytes(len);
        Err(refused)
    }

    /// Requests registered and not yet answered, failed or expired.
    #[cfg(test)]
    pub(crate) fn waiting_requests(&self) -> usize {
        self.waiting.lock().by_id.len()
    }

    /// Bytes queued to send and not yet written.
    #[cfg(test)]
    pub(crate) fn queued_bytes(&self) -> usize {
        self.room.queued_bytes.load(Ordering::SeqCst)
    }

    /// True if one more request would be taken, as large as any refused
    /// for want of bytes (or the connection is lost, which sending
    /// reports).
    fn has_room(&self) -> bool {
        let waiting = self.waiting.lock();
        waiting.closed
            || (waiting.by_id.len() < self.max_in_flight_requests
                && self.outbox.capacity() > 0
                && self.room.has_room_for_bytes(self.outbox_bytes))
    }

    /// The setting whose bound keeps a request out: what a
    /// [`ClientError::Busy`] names.
    pub(crate) fn full_bound(&self) -> &'static str {
        let in_flight = self.waiting.lock().by_id.len();
        if in_flight >= self.max_in_flight_requests || self.outbox.capacity() == 0 {
            "max_in_flight_requests"
        } else {
            "outbox_bytes"
        }
    }

    /// Waits until [`Live::has_room`].
    pub(crate) async fn wait_for_room(&self) {
        let _counted = RoomWaiter::new(&self.room);
        loop {
            let made = self.room.made.notified();
            tokio::pin!(made);
            made.as_mut().enable();
            if self.has_room() {
                return;
            }
            made.await;
        }
    }
}

/// One of the client's persistent connections: the connection of one
/// partition, replaced by a new one each time it is re-established.
pub(crate) struct Link {
    live: Mutex<Option<Arc<Live>>>,
    /// Incremented each time the link comes up again after a loss.
    pub(crate) generation: AtomicU64,
    reconnecting: AtomicBool,
    /// Wakes who waits for the link to come up (or to learn that it
    /// never will: fenced, or the client closed).
    changed: Notify,
}

impl Link {
    pub(crate) fn new(live: Arc<Live>) -> Self {
        Self {
            live: Mutex::new(Some(live)),
            generation: AtomicU64::new(0),
            reconnecting: AtomicBool::new(false),
            changed: Notify::new(),
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

    /// A notification of the next change of the link's state; enable it
    /// before looking at the state.
    pub(crate) fn changed(&self) -> Notified<'_> {
        self.changed.notified()
    }

    /// Wakes every caller waiting in [`Link::changed`].
    pub(crate) fn wake_waiters(&self) {
        self.changed.notify_waiters();
    }

    /// Puts `live` (or nothing, the link then down) in the place of the
    /// current connection, which is closed: its waiting requests fail and
    /// its end starts no reconnection.
    pub(crate) fn replace(&self, live: Option<Arc<Live>>) {
        let old = std::mem::replace(&mut *self.live.lock(), live);
        if let Some(old) = old {
            old.retired.store(true, Ordering::Release);
            old.conn.close(0u32.into(), b"reopened as a writer");
            old.fail_all(&ClientError::ConnectionLost {
                reason: "the connection was reopened as a writer's".into(),
            });
        }
        self.wake_waiters();
    }

    /// Closes the connection (on client shutdown).
    pub(crate) fn close(&self) {
        if let Some(live) = self.live.lock().take() {
            live.conn.close(0u32.into(), b"client closing");
            live.fail_all(&ClientError::ShutDown);
        }
        self.wake_waiters();
    }
}

/// The role a link presents in its `Hello`.
fn role_for(state: &ClientState, partition: usize) -> Role {
    if state.writer.load(Ordering::Acquire) {
        Role::Writer {
            partition: partition as u32,
            epoch: state.epoch_for_hello(),
        }
    } else {
        Role::Reader
    }
}

/// Opens a connection, runs the handshake in the client's role, and starts
/// the tasks that serve its control stream.
pub(crate) async fn establish(
    state: &Arc<ClientState>,
    partition: usize,
) -> Result<(Arc<Live>, Welcome), ClientError> {
    establish_as(state, partition, role_for(state, partition)).await
}

/// [`establish`], presenting `role`.
pub(crate) async fn establish_as(
    state: &Arc<ClientState>,
    partition: usize,
    role: Role,
) -> Result<(Arc<Live>, Welcome), ClientError> {
    let connect_timeout = Duration::from_millis(state.config.connect_timeout_ms);
    let attempt = async {
        let addr = state.resolve().await?;
        let connecting = state
            .endpoint
            .connect_with(state.quic.clone(), addr, &state.server_name)
            .map_err(|e| ClientError::Connect {
                server: state.config.server.clone(),
                reason: e.to_string(),
            })?;
        let conn = connecting.await.map_err(|e| connection_error(state, &e))?;
        let (mut send, mut recv) = conn
            .open_bi()
            .await
            .map_err(|e| connection_error(state, &e))?;
        let hello = Request {
            id: 0,
            body: RequestBody::Hello(Hello {
                protocol: PROTOCOL_VERSION,
                role,
            }),
        };
        send.write_all(&encode_frame(&hello, &[]))
            .await
            .map_err(|e| write_error(state, e))?;
        let mut decoder = FrameDecoder::trusting(state.response_limit_bytes);
        let welcome = loop {
            let chunk = recv
                .read_chunk(1 << 20, true)
                .await
                .map_err(|e| read_error(state, e))?
                .ok_or_else(|| {
                    ClientError::Protocol(
                        "the storage node closed the stream during the handshake".into(),
                    )
                })?;
            decoder.push(&chunk.bytes)?;
            if let Some(frame) = decoder.next_frame()? {
                let response = message::decode_response(&frame)?;
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
        let max_in_flight_requests = state.config.max_in_flight_requests.max(1);
        let (outbox, rx) = mpsc::channel(max_in_flight_requests);
        let room = Arc::new(Room::default());
        let live = Arc::new(Live {
            conn: conn.clone(),
            outbox,
            outbox_bytes: state.config.outbox_bytes,
            max_in_flight_requests,
            room: Arc::clone(&room),
            waiting: Mutex::new(PendingRequests::default()),
            dead: AtomicBool::new(false),
            retired: AtomicBool::new(false),
        });
        tokio::spawn(write_loop(send, rx, room));
        tokio::spawn(read_loop(
            Arc::clone(state),
            partition,
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
                server: state.config.server.clone(),
                reason: format!("no answer within {} ms", connect_timeout.as_millis()),
            })
        })
}

/// Sends queued frames, several per write when they pile up, and gives
/// their bytes back to the outbox once written.
async fn write_loop(mut send: quinn::SendStream, mut rx: mpsc::Receiver<Bytes>, room: Arc<Room>) {
    let mut batch = Vec::with_capacity(64);
    while rx.recv_many(&mut batch, 64).await > 0 {
        let len = batch.iter().map(Bytes::len).sum();
        let written = send.write_all_chunks(&mut batch).await;
        room.release_bytes(len);
        if written.is_err() {
            return;
        }
        batch.clear();
    }
    let _ = send.finish();
}

/// Delivers responses to their requests until the stream ends, then fails
/// whatever is still waiting and starts reconnecting.
async fn read_loop(
    state: Arc<ClientState>,
    partition: usize,
    live: Arc<Live>,
    mut recv: quinn::RecvStream,
    mut decoder: FrameDecoder,
) {
    let reason = loop {
        let chunk = match recv.read_chunk(1 << 20, true).await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break "the storage node closed the control stream".to_string(),
            Err(e) => {
                break match read_error(&state, e) {
                    ClientError::ConnectionLost { reason } => reason,
                    other => other.to_string(),
                };
            }
        };
        if let Err(e) = decoder.push(&chunk.bytes) {
            break format!("malformed response stream: {e}");
        }
        let mut failed = None;
        let mut fenced_now = None;
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => match message::decode_response(&frame) {
                    Ok(response) => {
                        if let Err(WireError::Fenced { current, .. }) = &response.body
                            && state.fence(*current)
                        {
                            fenced_now = Some(*current);
                        }
                        let waiting = live.waiting.lock().by_id.remove(&response.id);
                        if let Some(waiting) = waiting {
                            live.room.announce();
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
        if let Some(current_epoch) = fenced_now {
            tell(&state, LinkEvent::Fenced { current_epoch }).await;
        }
        if let Some(reason) = failed {
            break reason;
        }
    };
    live.conn.close(0u32.into(), b"control stream ended");
    if live.retired.load(Ordering::Acquire) {
        return;
    }
    if state.closing.load(Ordering::Acquire) {
        live.fail_all(&ClientError::ShutDown);
        return;
    }
    tracing::warn!(
        partition,
        "lost the connection to the storage node ({reason}); reconnecting"
    );
    live.fail_all(&ClientError::ConnectionLost { reason });
    tell(&state, LinkEvent::Down { partition }).await;
    start_reconnect(state, partition);
}

/// Sends `event` to the caller's channel, if it gave one, waiting while
/// the channel is full.
async fn tell(state: &ClientState, event: LinkEvent) {
    if let Some(events) = &state.config.link_events {
        // A caller that dropped its receiver wants no more events.
        let _ = events.send(event).await;
    }
}

/// Reconnects the link of `partition` in the background with exponential
/// backoff (50 ms doubling to 2 s) until it succeeds, the writer is fenced,
/// or the client closes.
pub(crate) fn start_reconnect(state: Arc<ClientState>, partition: usize) {
    // Before the client has all its links (while connecting), there is
    // nothing to reconnect yet: `connect` starts it once they are in place.
    let Some(link) = state.links().get(partition).cloned() else {
        return;
    };
    if link.reconnecting.swap(true, Ordering::SeqCst) {
        return;
    }
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(50);
        let mut reconnected = None;
        loop {
            if state.closing.load(Ordering::Acquire) {
                break;
            }
            tokio::time::sleep(backoff).await;
            match establish(&state, partition).await {
                Ok((live, welcome)) => {
                    *link.live.lock() = Some(Arc::clone(&live));
                    let generation = link.generation.fetch_add(1, Ordering::AcqRel) + 1;
                    link.wake_waiters();
                    tracing::info!(
                        partition,
                        epoch = welcome.epoch,
                        generation,
                        "reconnected to the storage node"
                    );
                    reconnected = Some((live, generation));
                    break;
                }
                Err(ClientError::Storage(WireError::Fenced { yours, current })) => {
                    tracing::error!(
                        partition,
                        "fenced by a newer writer (epoch {current} > {yours}); not reconnecting"
                    );
                    if state.fence(current) {
                        tell(
                            &state,
                            LinkEvent::Fenced {
                                current_epoch: current,
                            },
                        )
                        .await;
                    }
                    break;
                }
                Err(e) => {
                    tracing::debug!(partition, "reconnect failed: {e}");
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
        if let Some((_, generation)) = &reconnected {
            tell(
                &state,
                LinkEvent::Reconnected {
                    partition,
                    generation: *generation,
                },
            )
            .await;
        }
        // SeqCst with the role's store in `StorageClient::demote`: either
        // this sees the client demoted, or the demotion sees the flag
        // clear and starts the reconnection itself.
        link.reconnecting.store(false, Ordering::SeqCst);
        link.wake_waiters();
        match reconnected {
            // A loss of the new connection before the flag was cleared
            // found a reconnection under way; start the next one here.
            Some((live, _)) if live.dead.load(Ordering::Acquire) => {
                start_reconnect(state, partition);
            }
            Some(_) => {}
            // Refused as a fenced writer, then demoted to a reader while
            // this was ending: reconnect as one.
            None if !state.writer.load(Ordering::SeqCst)
                && !state.closing.load(Ordering::Acquire) =>
            {
                start_reconnect(state, partition);
            }
            None => {}
        }
    });
}

/// Classifies a connection failure; a refusal of our certificate gets a
/// message that says so.
pub(crate) fn connection_error(state: &ClientState, e: &quinn::ConnectionError) -> ClientError {
    let refusal = match e {
        quinn::ConnectionError::ConnectionClosed(close) if is_tls_alert(close.error_code) => {
            Some(String::from_utf8_lossy(&close.reason).into_owned())
        }
        quinn::ConnectionError::TransportError(t) if is_tls_alert(t.code) => Some(t.to_string()),
        _ => None,
    };
    match refusal {
        Some(reason) => ClientError::Refused {
            server: state.config.server.clone(),
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

pub(crate) fn read_error(state: &ClientState, e: quinn::ReadError) -> ClientError {
    match e {
        quinn::ReadError::ConnectionLost(c) => connection_error(state, &c),
        other => ClientError::ConnectionLost {
            reason: other.to_string(),
        },
    }
}

pub(crate) fn write_error(state: &ClientState, e: quinn::WriteError) -> ClientError {
    match e {
        quinn::WriteError::ConnectionLost(c) => connection_error(state, &c),
        other => ClientError::ConnectionLost {
            reason: other.to_string(),
        },
    }
}
