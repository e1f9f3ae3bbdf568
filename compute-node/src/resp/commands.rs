//! The commands the RESP server understands, and how a pipelined batch of
//! them is carried out.
//!
//! A batch runs in the order the client sent it. Runs of consecutive SETs
//! are sent to the storage node together (on the client's own connection,
//! so they take effect in order) and answered when all are acknowledged;
//! runs of consecutive GETs are resolved together (one round trip for what
//! the windows do not hold). A command that follows a run starts only when
//! the run has finished, so a GET sees every SET sent before it.

use bytes::{Bytes, BytesMut};
use splitkv_common::message::WireError;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::reply;
use crate::{Engine, EngineError};

/// The commands the server carries out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Get,
    Set,
    Del,
    Exists,
    Mget,
    Mset,
    Ping,
    Echo,
    Dbsize,
    Info,
    Command,
    Auth,
    Quit,
    Select,
    Config,
    Client,
}

/// A command: what it is, and what `COMMAND` reports about it, as Redis does.
struct CommandInfo {
    kind: Kind,
    name: &'static str,
    /// Argument count including the name; negative means at least that many.
    arity: i64,
    flags: &'static [&'static str],
    first_key: i64,
    last_key: i64,
    key_step: i64,
}

impl CommandInfo {
    fn arity_allows(&self, argc: usize) -> bool {
        if self.arity >= 0 {
            argc as i64 == self.arity
        } else {
            argc as i64 >= -self.arity
        }
    }
}

const fn info(
    kind: Kind,
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    keys: (i64, i64, i64),
) -> CommandInfo {
    CommandInfo {
        kind,
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        key_step: keys.2,
    }
}

const NO_KEYS: (i64, i64, i64) = (0, 0, 0);

const COMMANDS: &[CommandInfo] = &[
    info(Kind::Get, "get", 2, &["readonly", "fast"], (1, 1, 1)),
    info(Kind::Set, "set", -3, &["write", "denyoom"], (1, 1, 1)),
    info(Kind::Del, "del", -2, &["write"], (1, -1, 1)),
    info(
        Kind::Exists,
        "exists",
        -2,
        &["readonly", "fast"],
        (1, -1, 1),
    ),
    info(Kind::Mget, "mget", -2, &["readonly", "fast"], (1, -1, 1)),
    info(Kind::Mset, "mset", -3, &["write", "denyoom"], (1, -1, 2)),
    info(Kind::Ping, "ping", -1, &["fast", "stale"], NO_KEYS),
    info(Kind::Echo, "echo", 2, &["fast"], NO_KEYS),
    info(Kind::Dbsize, "dbsize", 1, &["readonly", "fast"], NO_KEYS),
    info(
        Kind::Info,
        "info",
        -1,
        &["random", "loading", "stale"],
        NO_KEYS,
    ),
    info(
        Kind::Command,
        "command",
        -1,
        &["random", "loading", "stale"],
        NO_KEYS,
    ),
    info(
        Kind::Auth,
        "auth",
        -2,
        &["noscript", "loading", "stale", "fast"],
        NO_KEYS,
    ),
    info(Kind::Quit, "quit", 1, &["fast"], NO_KEYS),
    info(
        Kind::Select,
        "select",
        2,
        &["loading", "stale", "fast"],
        NO_KEYS,
    ),
    info(
        Kind::Config,
        "config",
        -2,
        &["admin", "loading", "stale"],
        NO_KEYS,
    ),
    info(
        Kind::Client,
        "client",
        -2,
        &["admin", "loading", "stale"],
        NO_KEYS,
    ),
];

/// The command named `name`, in any letter case (no allocation).
fn lookup(name: &[u8]) -> Option<&'static CommandInfo> {
    COMMANDS
        .iter()
        .find(|c| name.eq_ignore_ascii_case(c.name.as_bytes()))
}

/// Replies are written out once this many bytes are waiting (also inside a
/// batch, between runs).
pub const FLUSH_BYTES: usize = 1 << 20;

/// GETs (or MGET keys) resolved together at most: what a run holds in
/// memory before its replies can be written is at most this many values.
const GET_RUN_KEYS: usize = 64;

/// What the connection should do after a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep serving.
    Continue,
    /// Close after sending what was answered (QUIT).
    Close,
}

/// One RESP client's state.
pub struct RespClient<'a> {
    /// The engine.
    pub engine: &'a Engine,
    /// The partition this client's writes go to (so they stay in order).
    pub partition: usize,
    /// The password AUTH must give, if any.
    pub requirepass: Option<&'a str>,
    /// True once authenticated (or when no password is set).
    pub authenticated: bool,
    /// Extra lines for INFO (address, storage node).
    pub info: &'a str,
}

fn engine_error(out: &mut BytesMut, err: &EngineError) {
    match err.wire() {
        Some(WireError::Fenced { .. }) => reply::error(
            out,
            "READONLY this compute node was fenced by a newer writer; it can only read",
        ),
        Some(WireError::NotAWriter) => reply::error(out, "READONLY this compute node is a reader"),
        Some(WireError::TooLarge { .. } | WireError::EmptyKey) => {
            reply::error(out, &format!("ERR {err}"))
        }
        _ => reply::error(out, &format!("ERR storage: {err}")),
    }
}

/// Writes `out` to `writer` once it holds [`FLUSH_BYTES`] or more.
async fn flush_if_full<W: AsyncWrite + Unpin>(
    out: &mut BytesMut,
    writer: &mut W,
) -> std::io::Result<()> {
    if out.len() >= FLUSH_BYTES {
        writer.write_all(out).await?;
        out.clear();
    }
    Ok(())
}

impl RespClient<'_> {
    /// The command `cmd` names if this client may run it as given (it has
    /// authenticated, and the argument count fits); `None` means it takes
    /// the general path, which answers with the right error.
    fn runnable(&self, cmd: &[Bytes]) -> Option<Kind> {
        let entry = lookup(cmd.first()?)?;
        (self.authenticated && entry.arity_allows(cmd.len())).then_some(entry.kind)
    }

    /// Carries out a batch of commands in order, answering into `out` and
    /// writing replies to `writer` whenever [`FLUSH_BYTES`] are waiting.
    pub async fn run<W: AsyncWrite + Unpin>(
        &mut self,
        batch: &[Vec<Bytes>],
        out: &mut BytesMut,
        writer: &mut W,
    ) -> std::io::Result<Flow> {
        let mut i = 0;
        while i < batch.len() {
            let kind = self.runnable(&batch[i]);
            // Runs of consecutive plain SETs or GETs go to the storage node
            // together.
            let run_of = |want: Kind, argc: usize, most: usize| {
                let end = batch[i..]
                    .iter()
                    .take(most)
                    .position(|cmd| cmd.len() != argc || self.runnable(cmd) != Some(want))
                    .map_or((i + most).min(batch.len()), |n| i + n);
                i..end.max(i + 1)
            };
            match kind {
                Some(Kind::Set) if batch[i].len() == 3 => {
                    let run = run_of(Kind::Set, 3, usize::MAX);
                    i = run.end;
                    self.set_run(batch[run].iter().map(Vec::as_slice), out)
                        .await;
                }
                Some(Kind::Get) => {
                    let run = run_of(Kind::Get, 2, GET_RUN_KEYS);
                    i = run.end;
                    let keys: Vec<&[u8]> = batch[run].iter().map(|cmd| &cmd[1][..]).collect();
                    self.get_run(&keys, out).await;
                }
                _ => {
                    if self.one(&batch[i], out, writer).await? == Flow::Close {
                        return Ok(Flow::Close);
                    }
                    i += 1;
                }
            }
            flush_if_full(out, writer).await?;
        }
        Ok(Flow::Continue)
    }

    /// Answers each of `run` (plain `SET key value` commands): all are sent
    /// on the client's own connection before any acknowledgement is waited
    /// for, so they take effect in order at the cost of one round trip.
    async fn set_run<'c>(
        &self,
        run: impl ExactSizeIterator<Item = &'c [Bytes]>,
        out: &mut BytesMut,
    ) {
        let mut pending = Vec::with_capacity(run.len());
        for cmd in run {
            pending.push(
                self.engine
                    .start_put(self.partition, cmd[1].clone(), &cmd[2])
                    .await,
            );
        }
        for started in pending {
            let result = match started {
                Ok(put) => self.engine.finish_put(put).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => reply::simple(out, "OK"),
                Err(e) => engine_error(out, &e),
            }
        }
    }

    /// Answers each of `keys` as a GET does: one round trip for what the
    /// windows do not hold; one key's failure fails only its reply.
    async fn get_run(&self, keys: &[&[u8]], out: &mut BytesMut) {
        for value in self.engine.get_each_async(keys).await {
            match value {
                Ok(value) => reply::bulk(out, value.as_deref()),
                Err(e) => engine_error(out, &e),
            }
        }
    }

    async fn one<W: AsyncWrite + Unpin>(
        &mut self,
        cmd: &[Bytes],
        out: &mut BytesMut,
        writer: &mut W,
    ) -> std::io::Result<Flow> {
        let Some(name) = cmd.first() else {
            return Ok(Flow::Continue);
        };
        let entry = lookup(name);
        let kind = entry.map(|e| e.kind);
        if !self.authenticated && kind != Some(Kind::Auth) && kind != Some(Kind::Quit) {
            reply::error(out, "NOAUTH Authentication required.");
            return Ok(Flow::Continue);
        }
        let Some(entry) = entry else {
            unknown_command(cmd, out);
            return Ok(Flow::Continue);
        };
        if !entry.arity_allows(cmd.len()) {
            let name = entry.name;
            reply::error(
                out,
                &format!("ERR wrong number of arguments for '{name}' command"),
            );
            return Ok(Flow::Continue);
        }
        match entry.kind {
            Kind::Get => self.get_run(&[&cmd[1][..]], out).await,
            Kind::Set => {
                if cmd.len() > 3 {
                    reply::error(out, "ERR syntax error (SET options are not supported)");
                } else {
                    self.set_run(std::iter::once(cmd), out).await;
                }
            }
            Kind::Del => {
                let mut removed = 0;
                for key in &cmd[1..] {
                    if !self.engine.contains(key) {
                        continue;
                    }
                    match self.engine.delete_async(self.partition, key).await {
                        Ok(true) => removed += 1,
                        Ok(false) => {}
                        Err(e) => {
                            engine_error(out, &e);
                            return Ok(Flow::Continue);
                        }
                    }
                }
                reply::integer(out, removed);
            }
            Kind::Exists => {
                let count = cmd[1..].iter().filter(|k| self.engine.contains(k)).count();
                reply::integer(out, count as i64);
            }
            Kind::Mget => {
                // Keys are resolved in runs and their replies written as
                // they come, so a long MGET is not held whole in memory; a
                // key that fails gets an error element in its place.
                reply::array(out, cmd.len() - 1);
                for keys in cmd[1..].chunks(GET_RUN_KEYS) {
                    let keys: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
                    self.get_run(&keys, out).await;
                    flush_if_full(out, writer).await?;
                }
            }
            Kind::Mset => {
                if cmd.len().is_multiple_of(2) {
                    reply::error(out, "ERR wrong number of arguments for 'mset' command");
                } else {
                    let items: Vec<(&[u8], &[u8])> = cmd[1..]
                        .chunks(2)
                        .map(|kv| (&kv[0][..], &kv[1][..]))
                        .collect();
                    match self.engine.put_many_async(self.partition, &items).await {
                        Ok(()) => reply::simple(out, "OK"),
                        Err(e) => engine_error(out, &e),
                    }
                }
            }
            Kind::Ping => match cmd.get(1) {
                Some(message) => reply::bulk(out, Some(message)),
                None => reply::simple(out, "PONG"),
            },
            Kind::Echo => reply::bulk(out, Some(&cmd[1])),
            Kind::Dbsize => reply::integer(out, self.engine.len() as i64),
            Kind::Info => {
                let text = super::info::render(self.engine, self.info);
                reply::bulk(out, Some(text.as_bytes()));
            }
            Kind::Command => command(cmd, out),
            Kind::Auth => self.auth(cmd, out),
            Kind::Quit => {
                reply::simple(out, "OK");
                return Ok(Flow::Close);
            }
            Kind::Select => {
                if &cmd[1][..] == b"0" {
                    reply::simple(out, "OK");
                } else {
                    reply::error(out, "ERR DB index is out of range");
                }
            }
            Kind::Config => {
                // Clients probe settings at start; SplitKV has none to show.
                reply::array(out, 0);
            }
            Kind::Client => reply::simple(out, "OK"),
        }
        Ok(Flow::Continue)
    }

    fn auth(&mut self, cmd: &[Bytes], out: &mut BytesMut) {
        let Some(expected) = self.requirepass else {
            reply::error(
                out,
                "ERR AUTH <password> called without any password configured for the default user. \
                 Are you sure your configuration is correct?",
            );
            return;
        };
        // AUTH password, or AUTH default password.
        let given = match cmd.len() {
            2 => Some(&cmd[1]),
            3 if &cmd[1][..] == b"default" => Some(&cmd[2]),
            _ => None,
        };
        if given.is_some_and(|p| &p[..] == expected.as_bytes()) {
            self.authenticated = true;
            reply::simple(out, "OK");
        } else {
            reply::error(
                out,
                "WRONGPASS invalid username-password pair or user is disabled.",
            );
        }
    }
}

/// The reply to a command SplitKV does not know, worded as Redis's.
fn unknown_command(cmd: &[Bytes], out: &mut BytesMut) {
    let args: Vec<String> = cmd[1..]
        .iter()
        .take(3)
        .map(|a| format!("'{}'", String::from_utf8_lossy(a)))
        .collect();
    let shown: String = String::from_utf8_lossy(&cmd[0]).chars().take(128).collect();
    reply::error(
        out,
        &format!(
            "ERR unknown command '{shown}', with args beginning with: {}",
            args.join(" ")
        ),
    );
}

/// COMMAND, COMMAND COUNT, COMMAND INFO name..., COMMAND DOCS.
fn command(cmd: &[Bytes], out: &mut BytesMut) {
    let sub = cmd
        .get(1)
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    match sub.as_deref() {
        None => {
            reply::array(out, COMMANDS.len());
            for entry in COMMANDS {
                command_entry(out, entry);
            }
        }
        Some("count") => reply::integer(out, COMMANDS.len() as i64),
        Some("info") => {
            reply::array(out, cmd.len() - 2);
            for name in &cmd[2..] {
                match lookup(name) {
                    Some(entry) => command_entry(out, entry),
                    None => reply::bulk(out, None),
                }
            }
        }
        Some("docs") => reply::array(out, 0),
        Some(other) => reply::error(
            out,
            &format!("ERR unknown subcommand '{other}' for 'command'"),
        ),
    }
}

fn command_entry(out: &mut BytesMut, entry: &CommandInfo) {
    reply::array(out, 6);
    reply::bulk(out, Some(entry.name.as_bytes()));
    reply::integer(out, entry.arity);
    reply::array(out, entry.flags.len());
    for flag in entry.flags {
        reply::simple(out, flag);
    }
    reply::integer(out, entry.first_key);
    reply::integer(out, entry.last_key);
    reply::integer(out, entry.key_step);
}
