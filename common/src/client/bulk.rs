//! Bulk transfers: a request on a QUIC stream of its own whose answer is a
//! run of frames (a value-log range, a key-log export, a followed key log),
//! read with a deadline on each wait for more bytes rather than on the
//! whole transfer.

use std::time::Duration;

use bytes::Bytes;

use super::call::unexpected;
use super::link::{self, encode_frame};
use super::{ClientError, StorageClient};
use crate::frame::FrameDecoder;
use crate::message::{self, Request, RequestBody, ResponseBody};

impl StorageClient {
    /// Opens a bulk stream on the connection of `partition`, sends `body`,
    /// and hands each response frame to `on_frame` until it returns
    /// `Ok(true)` (done) or the stream ends.
    async fn bulk(
        &self,
        partition: usize,
        body: RequestBody<'_>,
        idle: BulkIdle,
        mut on_frame: impl FnMut(ResponseBody, Bytes) -> Result<bool, ClientError>,
    ) -> Result<(), ClientError> {
        let live = self.live(partition % self.partitions().max(1))?;
        let frame = encode_frame(&Request { id: 0, body }, &[]);
        let missed = || ClientError::DeadlineExceeded {
            after_ms: self.state.config.request_timeout_ms,
        };
        // A followed stream keeps the client's half open for its reports
        // of what it has taken; any other is finished after the request.
        let follow = idle == BulkIdle::Unbounded;
        let start = async {
            let (mut send, recv) = live
                .conn
                .open_bi()
                .await
                .map_err(|e| link::connection_error(&self.state, &e))?;
            send.write_all(&frame)
                .await
                .map_err(|e| link::write_error(&self.state, e))?;
            if !follow {
                let _ = send.finish();
            }
            Ok::<_, ClientError>((send, recv))
        };
        let (mut send, mut recv) = tokio::time::timeout(self.timeout(), start)
            .await
            .map_err(|_| missed())??;
        let buffer = self.state.bulk_buffers.lock().pop().unwrap_or_default();
        let mut decoder =
            FrameDecoder::trusting_with_buffer(self.state.response_limit_bytes, buffer);
        // The deadline bounds each wait for more bytes, not the whole
        // transfer: an export of a large key log may take longer than one
        // request's deadline while bytes keep arriving. A followed key log
        // may be quiet for any time: only the connection's liveness bounds
        // that wait.
        let wait_limit = match idle {
            BulkIdle::Deadline => self.timeout(),
            BulkIdle::Unbounded => Duration::MAX,
        };
        let mut taken_cost = 0;
        let mut taken = TakenReport::default();
        let result = loop {
            let read = recv.read_chunk(4 << 20, true);
            let chunk = match tokio::time::timeout(wait_limit, read).await {
                Err(_) => break Err(missed()),
                Ok(Ok(Some(chunk))) => chunk,
                Ok(Ok(None)) => {
                    let reason = match decoder.finish() {
                        Err(e) => e.to_string(),
                        Ok(()) => "bulk stream ended before its last frame".into(),
                    };
                    break Err(ClientError::Protocol(reason));
                }
                Ok(Err(e)) => break Err(link::read_error(&self.state, e)),
            };
            if let Err(e) = decoder.push(&chunk.bytes) {
                break Err(e.into());
            }
            if let Some(done) = deliver_frames(&mut decoder, &mut taken_cost, &mut on_frame) {
                break done;
            }
            if follow && let Some(report) = taken.due(taken_cost) {
                let write = send.write_all(&report);
                match tokio::time::timeout(self.timeout(), write).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => break Err(link::write_error(&self.state, e)),
                    Err(_) => break Err(missed()),
                }
            }
        };
        let mut pool = self.state.bulk_buffers.lock();
        if pool.len() < BULK_BUFFERS_KEPT {
            pool.push(decoder.into_buffer());
        }
        result
    }

    /// Reads up to `max_len` bytes of `partition`'s value log from `offset`
    /// on a stream of its own. Returns the bytes (never past the committed
    /// end) and the committed end.
    pub async fn read_range(
        &self,
        partition: usize,
        offset: u64,
        max_len: usize,
    ) -> Result<(Bytes, u64), ClientError> {
        let mut out = None;
        let body = RequestBody::ReadRange {
            partition: partition as u32,
            offset,
            max_len: max_len as u32,
        };
        self.bulk(
            partition,
            body,
            BulkIdle::Deadline,
            |body, blob| match body {
                ResponseBody::Range { committed_end } => {
                    out = Some((blob, committed_end));
                    Ok(true)
                }
                other => Err(unexpected(&other)),
            },
        )
        .await?;
        out.ok_or_else(|| ClientError::Protocol("range read without a range".into()))
    }

    /// Streams `partition`'s key log from `from_seq` on: `on_chunk` receives
    /// runs of whole, checksummed key-log frames. Returns the key-log end
    /// the export caught up with.
    pub async fn export_keylog(
        &self,
        partition: usize,
        from_seq: u64,
        mut on_chunk: impl FnMut(Bytes) -> Result<(), ClientError>,
    ) -> Result<u64, ClientError> {
        let mut end_seen = 0;
        let body = RequestBody::ExportKeyLog {
            partition: partition as u32,
            from_seq,
        };
        self.bulk(
            partition,
            body,
            BulkIdle::Deadline,
            |body, blob| match body {
                ResponseBody::ExportChunk { end, done, .. } => {
                    end_seen = end;
                    on_chunk(blob)?;
                    Ok(done)
                }
                other => Err(unexpected(&other)),
            },
        )
        .await?;
        Ok(end_seen)
    }

    /// Follows `partition`'s key log from `from_seq` on (see
    /// [`RequestBody::FollowKeyLog`]): `on_chunk` receives runs of whole,
    /// checksummed key-log frames as they are appended, with `true` once
    /// the stream has caught up with the end it found. Runs until the
    /// stream or its connection ends (then an error: follow again from the
    /// last sequence number applied) or `on_chunk` fails; no deadline
    /// applies to the wait for new entries, and waiting costs nothing.
    pub async fn follow_keylog(
        &self,
        partition: usize,
        from_seq: u64,
        mut on_chunk: impl FnMut(Bytes, bool) -> Result<(), ClientError>,
    ) -> Result<(), ClientError> {
        let body = RequestBody::FollowKeyLog {
            partition: partition as u32,
            from_seq,
        };
        self.bulk(
            partition,
            body,
            BulkIdle::Unbounded,
            |body, blob| match body {
                ResponseBody::ExportChunk { done, .. } => {
                    on_chunk(blob, done)?;
                    Ok(false)
                }
                other => Err(unexpected(&other)),
            },
        )
        .await
    }
}

/// How long a bulk transfer may wait for its next bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BulkIdle {
    /// A request's deadline.
    Deadline,
    /// As long as the connection lives (a followed key log).
    Unbounded,
}

/// When a reader says what it has taken of a followed stream.
#[derive(Default)]
struct TakenReport {
    /// Cost of the chunks taken, as last reported.
    reported: u64,
}

impl TakenReport {
    /// With chunks of `cost_bytes` taken since the stream began, the report
    /// to send once [`message::FOLLOW_REPORT_BYTES`] more have been taken
    /// since the last one.
    fn due(&mut self, cost_bytes: u64) -> Option<Bytes> {
        if cost_bytes - self.reported < message::FOLLOW_REPORT_BYTES {
            return None;
        }
        self.reported = cost_bytes;
        let body = RequestBody::FollowTaken { cost_bytes };
        Some(encode_frame(&Request { id: 0, body }, &[]))
    }
}

/// Receive buffers of bulk transfers kept for reuse.
const BULK_BUFFERS_KEPT: usize = 8;

/// Hands each complete frame to `on_frame`, adding its
/// [`message::follow_chunk_cost`] to `cost_bytes`; `Some` once the
/// transfer is over (its last frame delivered, or an error).
fn deliver_frames(
    decoder: &mut FrameDecoder,
    cost_bytes: &mut u64,
    on_frame: &mut impl FnMut(ResponseBody, Bytes) -> Result<bool, ClientError>,
) -> Option<Result<(), ClientError>> {
    loop {
        let frame = match decoder.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => return None,
            Err(e) => return Some(Err(e.into())),
        };
        *cost_bytes += message::follow_chunk_cost(frame.blob.len());
        let outcome = message::decode_response(&frame)
            .map_err(ClientError::from)
            .and_then(|response| response.body.map_err(ClientError::Storage))
            .and_then(|body| on_frame(body, frame.blob));
        match outcome {
            Ok(false) => {}
            Ok(true) => return Some(Ok(())),
            Err(e) => return Some(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TakenReport;
    use crate::frame::FrameDecoder;
    use crate::message::{self, FOLLOW_REPORT_BYTES, RequestBody};

    /// The cost a report names.
    fn reported(frame: &[u8]) -> u64 {
        let mut decoder = FrameDecoder::new(1 << 10);
        decoder.push(frame).expect("push");
        let frame = decoder.next_frame().expect("a frame").expect("whole");
        match message::decode_request(&frame).expect("decodes").body {
            RequestBody::FollowTaken { cost_bytes } => cost_bytes,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_follower_reports_what_it_took_each_time_it_took_a_quarter_window_more() {
        let mut report = TakenReport::default();
        assert!(report.due(0).is_none());
        assert!(report.due(FOLLOW_REPORT_BYTES - 1).is_none());
        let first = report.due(FOLLOW_REPORT_BYTES + 10).expect("due");
        assert_eq!(reported(&first), FOLLOW_REPORT_BYTES + 10);
        assert!(report.due(2 * FOLLOW_REPORT_BYTES).is_none());
        let second = report.due(2 * FOLLOW_REPORT_BYTES + 10).expect("due");
        assert_eq!(reported(&second), 2 * FOLLOW_REPORT_BYTES + 10);
    }
}
