//! The string commands: GET, SET, MGET, MSET.

use bytes::Bytes;
use tokio::io::AsyncWrite;

use super::{GET_RUN_KEYS, RespClient, arity_error, engine_error};
use crate::resp::reply::Replies;

impl RespClient<'_> {
    /// SET key value (options are refused with a syntax error).
    pub(super) async fn set(&mut self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len() > 3 {
            out.error("ERR syntax error (SET options are not supported)");
        } else if let Some(overlay) = &mut self.overlay {
            overlay.put(cmd[1].clone(), cmd[2].clone());
            out.simple("OK");
        } else {
            self.set_run(std::iter::once(cmd), out).await;
        }
    }

    /// MGET key...: keys are resolved in runs and their replies written as
    /// they come, so a long MGET is not held whole in memory; a key that
    /// fails gets an error element in its place.
    pub(super) async fn mget<W: AsyncWrite + Unpin>(
        &mut self,
        cmd: &[Bytes],
        out: &mut Replies,
        writer: &mut W,
    ) -> std::io::Result<()> {
        out.array(cmd.len() - 1);
        for keys in cmd[1..].chunks(GET_RUN_KEYS) {
            let keys: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
            self.get_run(&keys, out).await;
            self.write_early(out, writer).await?;
        }
        Ok(())
    }

    /// MSET key value [key value ...], as one unit in storage.
    pub(super) async fn mset(&mut self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len().is_multiple_of(2) {
            return out.error(&arity_error("mset"));
        }
        let puts = cmd[1..]
            .chunks(2)
            .map(|kv| (kv[0].clone(), Some(kv[1].clone())))
            .collect();
        match self.write(puts).await {
            Ok(()) => out.simple("OK"),
            Err(e) => engine_error(out, &e),
        }
    }
}
