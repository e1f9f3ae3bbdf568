//! The replication commands: ROLE, and REPLICAOF / SLAVEOF NO ONE, which
//! promotes a reader (a read-only compute node, which answers as a Redis
//! replica) to the writer.

use bytes::Bytes;

use super::{RespClient, fail};
use crate::resp::info::storage_host_port;
use crate::resp::reply::Replies;

/// Redis's answer to a write sent to a read-only replica.
pub(super) const READ_ONLY_REPLICA: &str = "READONLY You can't write against a read only replica.";

impl RespClient<'_> {
    /// ROLE: a writer answers as a Redis master without replicas (its
    /// offset is the highest sequence number it has applied); a reader as
    /// a replica of the storage node it follows, `connected` while every
    /// partition's key-log stream follows the end.
    pub(super) fn role(&self, out: &mut Replies) {
        let offset = i64::try_from(self.engine.applied_seq()).unwrap_or(i64::MAX);
        if self.engine.is_writer() {
            out.array(3);
            out.bulk(b"master");
            out.integer(offset);
            out.array(0);
        } else {
            let (host, port) = storage_host_port(&self.shared.storage);
            out.array(5);
            out.bulk(b"slave");
            out.bulk(host.as_bytes());
            out.integer(port);
            let state: &[u8] = if self.engine.following() {
                b"connected"
            } else {
                b"connecting"
            };
            out.bulk(state);
            out.integer(offset);
        }
    }

    /// REPLICAOF NO ONE (and SLAVEOF NO ONE): a reader becomes the writer
    /// (a new writer epoch fences the old one; the reader catches up with
    /// the key logs first), a writer answers OK at once. A reader follows
    /// the storage node it was started with, so REPLICAOF host port is
    /// refused.
    pub(super) async fn replicaof(&self, cmd: &[Bytes], out: &mut Replies) {
        let no_one = cmd[1].eq_ignore_ascii_case(b"no") && cmd[2].eq_ignore_ascii_case(b"one");
        if !no_one {
            out.error(
                "ERR a SplitKV compute node follows its storage node; \
                 only REPLICAOF NO ONE (promotion to the writer) is supported",
            );
            return;
        }
        match self.engine.promote_async().await {
            Ok(_) => out.simple("OK"),
            Err(e) => fail(out, &e),
        }
    }
}
