//! The handshake of a connection's control stream: its first request must
//! be `Hello`, which is answered with `Welcome` (the partition count, the
//! writer epoch, the limits) or refused.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use splitkv_common::frame::FrameDecoder;
use splitkv_common::message::{
    self, Hello, PROTOCOL_VERSION, RequestBody, ResponseBody, Role, WireError,
};

use super::context::{ServerContext, encode_response};
use super::stream::{CloseReason, next_frame};
use crate::StorageError;

/// How long a new connection may take to send its `Hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handshake granted a connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grant {
    /// `Some((partition, epoch))` for a writer.
    pub(crate) writer: Option<(usize, u64)>,
}

/// Reads the control stream's first request, which must be `Hello`, and
/// answers it. Returns what was granted; `None` if the stream ended first
/// or the `Hello` was refused (the refusal is sent, and the stream
/// finished).
pub(crate) async fn accept(
    context: &Arc<ServerContext>,
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
    decoder: &mut FrameDecoder,
    scratch: &mut BytesMut,
) -> Result<Option<Grant>, CloseReason> {
    let first = tokio::time::timeout(HELLO_TIMEOUT, next_frame(recv, decoder))
        .await
        .map_err(|_| CloseReason::HelloTimeout)??;
    let Some(first) = first else { return Ok(None) };
    let request = message::decode_request(&first)?;
    let RequestBody::Hello(hello) = request.body else {
        return Err(CloseReason::HelloRequired);
    };
    match grant(context, &hello).await {
        Ok((grant, welcome)) => {
            let frame = encode_response(scratch, request.id, Ok(welcome));
            send.write_all(&frame).await?;
            Ok(Some(grant))
        }
        Err(refusal) => {
            tracing::info!("refused a Hello: {refusal}");
            let frame = encode_response(scratch, request.id, Err(refusal));
            let _ = send.write_all(&frame).await;
            let _ = send.finish();
            let _ = tokio::time::timeout(Duration::from_secs(1), send.stopped()).await;
            Ok(None)
        }
    }
}

/// What `hello` is granted, and the `Welcome` that says so; or why it is
/// refused (another protocol version, no such partition, a writer epoch
/// that is not current).
async fn grant(
    context: &Arc<ServerContext>,
    hello: &Hello,
) -> Result<(Grant, ResponseBody), WireError> {
    if hello.protocol != PROTOCOL_VERSION {
        return Err(WireError::ProtocolVersion {
            node: PROTOCOL_VERSION,
            client: hello.protocol,
        });
    }
    let engine = &context.engine;
    let count = engine.partition_count();
    let (writer, epoch) = match hello.role {
        Role::Reader => (None, 0),
        Role::Writer { partition, epoch } => {
            let partition = partition as usize;
            if partition >= count {
                return Err(WireError::NoSuchPartition {
                    partition: partition as u32,
                    count: count as u32,
                });
            }
            let epoch = match epoch {
                None => {
                    let engine = Arc::clone(engine);
                    let begun = tokio::task::spawn_blocking(move || engine.begin_writer_epoch())
                        .await
                        .map_err(|e| WireError::Io {
                            message: e.to_string(),
                        })?;
                    let epoch = begun.map_err(StorageError::into_wire)?;
                    tracing::info!(epoch, "a new writer took over");
                    epoch
                }
                Some(epoch) => {
                    let current = engine.writer_epoch();
                    if epoch != current {
                        return Err(WireError::Fenced {
                            yours: epoch,
                            current,
                        });
                    }
                    epoch
                }
            };
            (Some((partition, epoch)), epoch)
        }
    };
    let limits = engine.limits();
    let welcome = ResponseBody::Welcome {
        partitions: count as u32,
        epoch,
        max_key_bytes: limits.max_key_bytes as u32,
        max_value_bytes: limits.max_value_bytes as u32,
        io_engine: engine.io_engine().to_string(),
    };
    Ok((Grant { writer }, welcome))
}
