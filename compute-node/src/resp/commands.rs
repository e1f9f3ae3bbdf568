//! How a pipelined batch of commands is carried out, and what each command
//! answers: reply for reply what Redis 7 answers, in the connection's
//! protocol version.
//!
//! A batch runs in the order the client sent it. Runs of consecutive SETs
//! are sent to the storage node together (on the client's own connection,
//! so they take effect in order) and answered when all are acknowledged;
//! runs of consecutive GETs are resolved together (one round trip for what
//! the windows do not hold). A command that follows a run starts only when
//! the run has finished, so a GET sees every SET sent before it.
//!
//! Every command is checked as Redis checks it, in Redis's order: an
//! unknown command or subcommand, then the arity, then authentication;
//! inside MULTI a command that fails these checks marks the transaction so
//! that EXEC aborts, and any other is queued.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use splitkv_common::message::WireError;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::clients::{ClientEntry, ClientRegistry};
use super::reply::{Protocol, Replies};
use super::table::{COMMANDS, CommandInfo, Kind, lookup, lookup_full};
use crate::{Engine, EngineError};

/// Replies are written out once this many bytes are waiting (also inside a
/// batch, between runs).
pub const FLUSH_BYTES: usize = 1 << 20;

/// GETs (or MGET keys) resolved together at most: what a run holds in
/// memory before its replies can be written is at most this many values.
const GET_RUN_KEYS: usize = 64;

/// Commands one MULTI may queue before EXEC; one more aborts it.
const MAX_QUEUED_COMMANDS: usize = 1 << 16;

/// Keys one client may WATCH at once.
const MAX_WATCHED_KEYS: usize = 1 << 16;

/// The Redis version reported by HELLO and INFO (the version whose replies
/// SplitKV's follow).
pub const REDIS_VERSION: &str = "7.2.0";

/// What the connection should do after a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep serving.
    Continue,
    /// Close after sending what was answered (QUIT, or killed).
    Close,
}

/// CLIENT REPLY's modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplyMode {
    On,
    Off,
    /// The next command's reply is dropped, then On.
    SkipNext,
}

/// A MULTI in progress.
#[derive(Debug, Default)]
struct Transaction {
    queued: Vec<Vec<Bytes>>,
    /// A command failed its checks while queuing: EXEC aborts.
    aborted: bool,
}

/// Settings of the server every connection shares.
#[derive(Debug)]
pub struct Shared {
    /// The password AUTH must give, if any.
    pub requirepass: Option<String>,
    /// A line for INFO naming the storage node.
    pub storage: String,
    /// The connected clients.
    pub clients: Arc<ClientRegistry>,
    /// When the server started.
    pub started: std::time::Instant,
    /// Commands carried out since start or CONFIG RESETSTAT.
    pub commands_processed: AtomicU64,
    /// Held shared by every command while it reads or writes, and
    /// exclusively by EXEC while it checks the watched keys and carries out
    /// its commands, so that no other client's command interleaves with a
    /// transaction. Never held while replies are written to a socket.
    pub exec_gate: tokio::sync::RwLock<()>,
}

/// One RESP client's state.
pub struct RespClient<'a> {
    /// The engine.
    pub engine: &'a Engine,
    /// The partition this client's writes go to (so they stay in order).
    pub partition: usize,
    /// The server's settings.
    pub shared: &'a Shared,
    /// This connection's entry in the client registry.
    pub me: &'a ClientEntry,
    /// True once authenticated (or when no password is set).
    pub authenticated: bool,
    /// The port the server listens on (CONFIG GET port).
    pub port: u16,
    reply_mode: ReplyMode,
    multi: Option<Transaction>,
    /// Watched keys with the sequence number each had at WATCH.
    watched: Vec<(Bytes, Option<u64>)>,
    /// This client's share of the EXEC gate while one of its commands runs.
    gate: Option<tokio::sync::RwLockReadGuard<'a, ()>>,
    /// True while EXEC carries out the queued commands (holding the gate
    /// exclusively).
    in_exec: bool,
}

fn engine_error(out: &mut Replies, err: &EngineError) {
    match err.wire() {
        Some(WireError::Fenced { .. }) => {
            out.error("READONLY this compute node was fenced by a newer writer; it can only read")
        }
        Some(WireError::NotAWriter) => out.error("READONLY this compute node is a reader"),
        Some(WireError::TooLarge { .. } | WireError::EmptyKey) => out.error(&format!("ERR {err}")),
        _ => out.error(&format!("ERR storage: {err}")),
    }
}

/// Writes `out` to `writer` once it holds [`FLUSH_BYTES`] or more.
async fn flush_if_full<W: AsyncWrite + Unpin>(
    out: &mut Replies,
    writer: &mut W,
) -> std::io::Result<()> {
    if out.bytes.len() >= FLUSH_BYTES {
        writer.write_all(&out.bytes).await?;
        out.bytes.clear();
    }
    Ok(())
}

/// Why a command cannot run as sent: the error Redis answers.
fn rejection(cmd: &[Bytes]) -> Result<&'static CommandInfo, String> {
    let Some(entry) = lookup(&cmd[0]) else {
        return Err(unknown_command(cmd));
    };
    let entry = if entry.subcommands.is_empty() || cmd.len() < 2 {
        entry
    } else {
        match entry.subcommand(&cmd[1]) {
            Some(sub) => sub,
            None => {
                return Err(format!(
                    "ERR unknown subcommand '{}'. Try {} HELP.",
                    shown(&cmd[1], 128),
                    entry.name.to_uppercase()
                ));
            }
        }
    };
    if !entry.arity_allows(cmd.len()) {
        return Err(arity_error(entry.name));
    }
    Ok(entry)
}

fn arity_error(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

/// At most `most` bytes of an argument, as text.
fn shown(arg: &[u8], most: usize) -> String {
    String::from_utf8_lossy(&arg[..arg.len().min(most)]).into_owned()
}

/// The reply to a command SplitKV does not know, worded as Redis's: the
/// arguments, each quoted and followed by a space, until 128 bytes are shown.
fn unknown_command(cmd: &[Bytes]) -> String {
    let mut args = String::new();
    for arg in &cmd[1..] {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        args.push_str(&format!("'{}' ", shown(arg, room)));
    }
    format!(
        "ERR unknown command '{}', with args beginning with: {args}",
        shown(&cmd[0], 128)
    )
}

/// True for a client name (or library name) Redis accepts: printable ASCII
/// without spaces.
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

fn parse_i64(arg: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(arg).ok()?;
    if text.is_empty() || text.starts_with('+') || (text.len() > 1 && text.starts_with("-0")) {
        return None;
    }
    if text.len() > 1 && text.starts_with('0') {
        return None;
    }
    text.parse().ok()
}

impl<'a> RespClient<'a> {
    /// A client that has not yet sent anything.
    pub fn new(engine: &'a Engine, shared: &'a Shared, me: &'a ClientEntry, port: u16) -> Self {
        Self {
            engine,
            partition: engine.assign_partition(),
            shared,
            me,
            authenticated: shared.requirepass.is_none(),
            port,
            reply_mode: ReplyMode::On,
            multi: None,
            watched: Vec::new(),
            gate: None,
            in_exec: false,
        }
    }

    /// True if `cmd` is a plain `SET k v` or `GET k` that may take the
    /// batched path (no transaction, replies on, authenticated).
    fn batchable(&self, cmd: &[Bytes], kind: Kind) -> bool {
        let argc = match kind {
            Kind::Set => 3,
            Kind::Get => 2,
            _ => return false,
        };
        self.authenticated
            && self.multi.is_none()
            && self.reply_mode == ReplyMode::On
            && cmd.len() == argc
            && cmd[0].eq_ignore_ascii_case(if kind == Kind::Set { b"set" } else { b"get" })
    }

    /// Carries out a batch of commands in order, answering into `out` and
    /// writing replies to `writer` whenever [`FLUSH_BYTES`] are waiting.
    pub async fn run<W: AsyncWrite + Unpin>(
        &mut self,
        batch: &[Vec<Bytes>],
        out: &mut Replies,
        writer: &mut W,
    ) -> std::io::Result<Flow> {
        self.shared
            .commands_processed
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let mut i = 0;
        while i < batch.len() {
            let run_of = |want: Kind, most: usize| {
                let end = batch[i..]
                    .iter()
                    .take(most)
                    .position(|cmd| !self.batchable(cmd, want))
                    .map_or((i + most).min(batch.len()), |n| i + n);
                i..end
            };
            let sets = run_of(Kind::Set, usize::MAX);
            if !sets.is_empty() {
                i = sets.end;
                let _gate = self.shared.exec_gate.read().await;
                self.set_run(batch[sets].iter().map(Vec::as_slice), out)
                    .await;
            } else {
                let gets = run_of(Kind::Get, GET_RUN_KEYS);
                if !gets.is_empty() {
                    i = gets.end;
                    let keys: Vec<&[u8]> = batch[gets].iter().map(|cmd| &cmd[1][..]).collect();
                    let _gate = self.shared.exec_gate.read().await;
                    self.get_run(&keys, out).await;
                } else {
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
        out: &mut Replies,
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
                Ok(()) => out.simple("OK"),
                Err(e) => engine_error(out, &e),
            }
        }
    }

    /// Answers each of `keys` as a GET does: one round trip for what the
    /// windows do not hold; one key's failure fails only its reply.
    async fn get_run(&self, keys: &[&[u8]], out: &mut Replies) {
        for value in self.engine.get_each_async(keys).await {
            match value {
                Ok(value) => out.bulk_or_null(value.as_deref()),
                Err(e) => engine_error(out, &e),
            }
        }
    }

    /// One command, with CLIENT REPLY's suppression applied.
    async fn one<W: AsyncWrite + Unpin>(
        &mut self,
        cmd: &[Bytes],
        out: &mut Replies,
        writer: &mut W,
    ) -> std::io::Result<Flow> {
        if cmd.is_empty() {
            return Ok(Flow::Continue);
        }
        let is_client_reply = cmd.len() >= 2
            && cmd[0].eq_ignore_ascii_case(b"client")
            && cmd[1].eq_ignore_ascii_case(b"reply");
        let suppress = match self.reply_mode {
            _ if is_client_reply => false,
            ReplyMode::On => false,
            ReplyMode::Off => true,
            ReplyMode::SkipNext => {
                self.reply_mode = ReplyMode::On;
                true
            }
        };
        let mark = out.bytes.len();
        // EXEC takes the gate exclusively itself.
        if !cmd[0].eq_ignore_ascii_case(b"exec") {
            self.gate = Some(self.shared.exec_gate.read().await);
        }
        let flow = self.checked(cmd, out, writer).await;
        self.gate = None;
        let flow = flow?;
        if suppress && out.bytes.len() >= mark {
            out.bytes.truncate(mark);
        }
        Ok(flow)
    }

    /// Checks a command as Redis does, queues it inside MULTI, or runs it.
    async fn checked<W: AsyncWrite + Unpin>(
        &mut self,
        cmd: &[Bytes],
        out: &mut Replies,
        writer: &mut W,
    ) -> std::io::Result<Flow> {
        let checked = rejection(cmd).and_then(|entry| {
            if self.authenticated || entry.flags.contains(&"no_auth") {
                Ok(entry)
            } else {
                Err("NOAUTH Authentication required.".to_string())
            }
        });
        let entry = match checked {
            Ok(entry) => entry,
            Err(text) if cmd[0].eq_ignore_ascii_case(b"exec") => {
                // A rejected EXEC discards the transaction, as Redis's
                // `execCommandAbort`.
                self.multi = None;
                self.watched.clear();
                let reason = text.strip_prefix("ERR ").unwrap_or(&text);
                out.error(&format!(
                    "EXECABORT Transaction discarded because of: {reason}"
                ));
                return Ok(Flow::Continue);
            }
            Err(text) => {
                self.abort_transaction();
                out.error(&text);
                return Ok(Flow::Continue);
            }
        };
        {
            let mut details = self.me.details.lock();
            details.last_command.clear();
            details.last_command.push_str(entry.name);
            details.last_active = Some(std::time::Instant::now());
        }
        let queues = !matches!(
            entry.kind,
            Kind::Exec | Kind::Discard | Kind::Multi | Kind::Watch | Kind::Quit | Kind::Reset
        );
        if let Some(transaction) = &mut self.multi
            && queues
        {
            if transaction.queued.len() >= MAX_QUEUED_COMMANDS {
                transaction.aborted = true;
                out.error("ERR too many commands queued in this transaction");
            } else {
                transaction.queued.push(cmd.to_vec());
                out.simple("QUEUED");
            }
            return Ok(Flow::Continue);
        }
        self.execute(entry, cmd, out, writer).await
    }

    fn abort_transaction(&mut self) {
        if let Some(transaction) = &mut self.multi {
            transaction.aborted = true;
        }
    }

    /// Runs a command that has passed its checks.
    async fn execute<W: AsyncWrite + Unpin>(
        &mut self,
        entry: &'static CommandInfo,
        cmd: &[Bytes],
        out: &mut Replies,
        writer: &mut W,
    ) -> std::io::Result<Flow> {
        match entry.kind {
            Kind::Get => self.get_run(&[&cmd[1][..]], out).await,
            Kind::Set => {
                if cmd.len() > 3 {
                    out.error("ERR syntax error (SET options are not supported)");
                } else {
                    self.set_run(std::iter::once(cmd), out).await;
                }
            }
            Kind::Del | Kind::Unlink => {
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
                out.integer(removed);
            }
            Kind::Type => out.simple(if self.engine.contains(&cmd[1]) {
                "string"
            } else {
                "none"
            }),
            Kind::Rename | Kind::Renamenx => {
                self.rename(&cmd[1], &cmd[2], entry.kind == Kind::Renamenx, out)
                    .await;
            }
            Kind::Copy => self.copy(cmd, out).await,
            Kind::Exists | Kind::Touch => {
                let count = cmd[1..].iter().filter(|k| self.engine.contains(k)).count();
                out.integer(count as i64);
            }
            Kind::Mget => {
                // Keys are resolved in runs and their replies written as
                // they come, so a long MGET is not held whole in memory; a
                // key that fails gets an error element in its place.
                out.array(cmd.len() - 1);
                for keys in cmd[1..].chunks(GET_RUN_KEYS) {
                    let keys: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
                    self.get_run(&keys, out).await;
                    // Inside EXEC the replies wait for the end; elsewhere
                    // the gate is let go while they are written.
                    if self.reply_mode == ReplyMode::On
                        && !self.in_exec
                        && out.bytes.len() >= FLUSH_BYTES
                    {
                        let shared = self.gate.take().is_some();
                        flush_if_full(out, writer).await?;
                        if shared {
                            self.gate = Some(self.shared.exec_gate.read().await);
                        }
                    }
                }
            }
            Kind::Mset => {
                if cmd.len().is_multiple_of(2) {
                    out.error(&arity_error("mset"));
                } else {
                    let items: Vec<(&[u8], &[u8])> = cmd[1..]
                        .chunks(2)
                        .map(|kv| (&kv[0][..], &kv[1][..]))
                        .collect();
                    match self.engine.put_many_async(self.partition, &items).await {
                        Ok(()) => out.simple("OK"),
                        Err(e) => engine_error(out, &e),
                    }
                }
            }
            Kind::Ping => match cmd.len() {
                1 => out.simple("PONG"),
                2 => out.bulk(&cmd[1]),
                _ => out.error(&arity_error("ping")),
            },
            Kind::Echo => out.bulk(&cmd[1]),
            Kind::Dbsize => out.integer(self.engine.len() as i64),
            Kind::Info => {
                let shared = self.shared;
                let facts = super::info::ServerFacts {
                    redis_version: REDIS_VERSION,
                    tcp_port: self.port,
                    storage: &shared.storage,
                    connected_clients: shared.clients.len(),
                    total_connections: shared.clients.total_registered(),
                    total_commands: shared.commands_processed.load(Ordering::Relaxed),
                    uptime_seconds: shared.started.elapsed().as_secs(),
                };
                let wanted: Vec<String> = cmd[1..]
                    .iter()
                    .map(|s| shown(s, 64).to_ascii_lowercase())
                    .collect();
                let text = super::info::render(self.engine, &facts, &wanted);
                out.verbatim(text.as_bytes());
            }
            Kind::Command
            | Kind::CommandCount
            | Kind::CommandDocs
            | Kind::CommandInfo
            | Kind::CommandList => command(entry.kind, cmd, out),
            Kind::Auth => self.auth(cmd, out),
            Kind::Quit => {
                out.simple("OK");
                return Ok(Flow::Close);
            }
            Kind::Select => match parse_i64(&cmd[1]) {
                Some(0) => out.simple("OK"),
                Some(_) => out.error("ERR DB index is out of range"),
                None => out.error("ERR value is not an integer or out of range"),
            },
            Kind::ConfigGet => self.config_get(cmd, out),
            Kind::ConfigSet => config_set(cmd, out),
            Kind::ConfigResetstat => {
                self.shared.commands_processed.store(0, Ordering::Relaxed);
                out.simple("OK");
            }
            Kind::Hello => self.hello(cmd, out),
            Kind::Reset => {
                self.multi = None;
                self.watched.clear();
                self.reply_mode = ReplyMode::On;
                self.set_protocol(out, Protocol::Resp2);
                self.me.details.lock().name.clear();
                self.authenticated = self.shared.requirepass.is_none();
                out.simple("RESET");
            }
            Kind::Time => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                out.array(2);
                out.bulk(now.as_secs().to_string().as_bytes());
                out.bulk(now.subsec_micros().to_string().as_bytes());
            }
            Kind::Multi => {
                if self.multi.is_some() {
                    out.error("ERR MULTI calls can not be nested");
                } else {
                    self.multi = Some(Transaction::default());
                    out.simple("OK");
                }
            }
            Kind::Exec => return self.exec(out, writer).await,
            Kind::Discard => {
                if self.multi.take().is_some() {
                    self.watched.clear();
                    out.simple("OK");
                } else {
                    out.error("ERR DISCARD without MULTI");
                }
            }
            Kind::Watch => {
                if self.multi.is_some() {
                    out.error("ERR WATCH inside MULTI is not allowed");
                } else if self.watched.len() + cmd.len() - 1 > MAX_WATCHED_KEYS {
                    out.error("ERR too many watched keys");
                } else {
                    for key in &cmd[1..] {
                        if !self.watched.iter().any(|(k, _)| k == key) {
                            self.watched.push((key.clone(), self.version_of(key)));
                        }
                    }
                    out.simple("OK");
                }
            }
            Kind::Unwatch => {
                self.watched.clear();
                out.simple("OK");
            }
            Kind::ClientId => out.integer(self.me.id as i64),
            Kind::ClientSetname => {
                if valid_name(&cmd[2]) {
                    self.me.details.lock().name = shown(&cmd[2], usize::MAX);
                    out.simple("OK");
                } else {
                    out.error(
                        "ERR Client names cannot contain spaces, newlines or special characters.",
                    );
                }
            }
            Kind::ClientGetname => {
                let name = self.me.details.lock().name.clone();
                out.bulk_or_null((!name.is_empty()).then_some(name.as_bytes()));
            }
            Kind::ClientInfo => {
                let mut line = self.me.describe();
                line.push('\n');
                out.verbatim(line.as_bytes());
            }
            Kind::ClientList => self.client_list(cmd, out),
            Kind::ClientSetinfo => self.client_setinfo(cmd, out),
            Kind::ClientKill => self.client_kill(cmd, out),
            Kind::ClientNoEvict | Kind::ClientNoTouch => {
                if cmd[2].eq_ignore_ascii_case(b"on") || cmd[2].eq_ignore_ascii_case(b"off") {
                    out.simple("OK");
                } else {
                    out.error("ERR syntax error");
                }
            }
            Kind::ClientReply => {
                if cmd[2].eq_ignore_ascii_case(b"on") {
                    self.reply_mode = ReplyMode::On;
                    out.simple("OK");
                } else if cmd[2].eq_ignore_ascii_case(b"off") {
                    self.reply_mode = ReplyMode::Off;
                } else if cmd[2].eq_ignore_ascii_case(b"skip") {
                    if self.reply_mode == ReplyMode::On {
                        self.reply_mode = ReplyMode::SkipNext;
                    }
                } else {
                    out.error("ERR syntax error");
                }
            }
            // Containers called with no subcommand fail their arity check.
            Kind::Config | Kind::Client => out.error(&arity_error(entry.name)),
        }
        Ok(Flow::Continue)
    }

    /// The index's sequence number for `key` (its newest put or delete),
    /// `None` if the index has no entry: a change to the key changes it.
    fn version_of(&self, key: &[u8]) -> Option<u64> {
        self.engine
            .inner
            .index
            .get(key)
            .map(|location| location.seq)
    }

    /// RENAME / RENAMENX: the value is written under `to`, then `from` is
    /// deleted (a crash between the two leaves both keys, never neither).
    async fn rename(&self, from: &[u8], to: &[u8], only_new: bool, out: &mut Replies) {
        let value = match self.engine.get_async(from).await {
            Ok(Some(value)) => value,
            Ok(None) => return out.error("ERR no such key"),
            Err(e) => return engine_error(out, &e),
        };
        if from == to {
            return if only_new {
                out.integer(0)
            } else {
                out.simple("OK")
            };
        }
        if only_new && self.engine.contains(to) {
            return out.integer(0);
        }
        if let Err(e) = self
            .engine
            .put_many_async(self.partition, &[(to, &value[..])])
            .await
        {
            return engine_error(out, &e);
        }
        if let Err(e) = self.engine.delete_async(self.partition, from).await {
            return engine_error(out, &e);
        }
        if only_new {
            out.integer(1);
        } else {
            out.simple("OK");
        }
    }

    /// COPY source destination [DB 0] [REPLACE].
    async fn copy(&self, cmd: &[Bytes], out: &mut Replies) {
        let mut replace = false;
        let mut j = 3;
        while j < cmd.len() {
            if cmd[j].eq_ignore_ascii_case(b"replace") {
                replace = true;
                j += 1;
            } else if cmd[j].eq_ignore_ascii_case(b"db") && j + 1 < cmd.len() {
                match parse_i64(&cmd[j + 1]) {
                    Some(0) => {}
                    Some(_) => return out.error("ERR DB index is out of range"),
                    None => return out.error("ERR value is not an integer or out of range"),
                }
                j += 2;
            } else {
                return out.error("ERR syntax error");
            }
        }
        let (from, to) = (&cmd[1][..], &cmd[2][..]);
        if from == to {
            return out.error("ERR source and destination objects are the same");
        }
        let value = match self.engine.get_async(from).await {
            Ok(Some(value)) => value,
            Ok(None) => return out.integer(0),
            Err(e) => return engine_error(out, &e),
        };
        if !replace && self.engine.contains(to) {
            return out.integer(0);
        }
        match self
            .engine
            .put_many_async(self.partition, &[(to, &value[..])])
            .await
        {
            Ok(()) => out.integer(1),
            Err(e) => engine_error(out, &e),
        }
    }

    fn set_protocol(&mut self, out: &mut Replies, protocol: Protocol) {
        out.protocol = protocol;
        self.me.details.lock().resp = protocol.number();
    }

    /// EXEC: the queued commands' replies as one array, or the null array
    /// if a watched key changed, or EXECABORT.
    async fn exec<W: AsyncWrite + Unpin>(
        &mut self,
        out: &mut Replies,
        writer: &mut W,
    ) -> std::io::Result<Flow> {
        let Some(transaction) = self.multi.take() else {
            out.error("ERR EXEC without MULTI");
            return Ok(Flow::Continue);
        };
        let watched = std::mem::take(&mut self.watched);
        if transaction.aborted {
            out.error("EXECABORT Transaction discarded because of previous errors.");
            return Ok(Flow::Continue);
        }
        let shared = self.shared;
        let _exclusive = shared.exec_gate.write().await;
        if watched
            .iter()
            .any(|(key, version)| self.version_of(key) != *version)
        {
            out.null_array();
            return Ok(Flow::Continue);
        }
        let queued = transaction.queued;
        // A transaction of SETs and MSETs goes to storage as one unit.
        let all_sets = !queued.is_empty()
            && queued.iter().all(|cmd| {
                (cmd[0].eq_ignore_ascii_case(b"set") && cmd.len() == 3)
                    || (cmd[0].eq_ignore_ascii_case(b"mset") && cmd.len() % 2 == 1)
            });
        out.array(queued.len());
        if all_sets {
            let items: Vec<(&[u8], &[u8])> = queued
                .iter()
                .flat_map(|cmd| cmd[1..].chunks(2).map(|kv| (&kv[0][..], &kv[1][..])))
                .collect();
            match self.engine.put_many_async(self.partition, &items).await {
                Ok(()) => (0..queued.len()).for_each(|_| out.simple("OK")),
                Err(e) => (0..queued.len()).for_each(|_| engine_error(out, &e)),
            }
            return Ok(Flow::Continue);
        }
        let mut flow = Flow::Continue;
        self.in_exec = true;
        for cmd in &queued {
            let entry = match rejection(cmd) {
                Ok(entry) => entry,
                Err(text) => {
                    out.error(&text);
                    continue;
                }
            };
            match Box::pin(self.execute(entry, cmd, out, writer)).await {
                Ok(Flow::Close) => flow = Flow::Close,
                Ok(Flow::Continue) => {}
                Err(e) => {
                    self.in_exec = false;
                    return Err(e);
                }
            }
        }
        self.in_exec = false;
        Ok(flow)
    }

    fn auth(&mut self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len() > 3 {
            out.error("ERR syntax error");
            return;
        }
        if cmd.len() == 2 && self.shared.requirepass.is_none() {
            out.error(
                "ERR AUTH <password> called without any password configured for the default user. \
                 Are you sure your configuration is correct?",
            );
            return;
        }
        let (user, password) = match cmd.len() {
            2 => (&b"default"[..], &cmd[1][..]),
            _ => (&cmd[1][..], &cmd[2][..]),
        };
        if self.password_fits(user, password) {
            self.authenticated = true;
            out.simple("OK");
        } else {
            out.error("WRONGPASS invalid username-password pair or user is disabled.");
        }
    }

    /// True if `user` is `default` and `password` is the password (any
    /// password when none is set, as for Redis's `nopass` default user).
    fn password_fits(&self, user: &[u8], password: &[u8]) -> bool {
        user == b"default"
            && self
                .shared
                .requirepass
                .as_ref()
                .is_none_or(|p| p.as_bytes() == password)
    }

    /// HELLO [protover [AUTH username password] [SETNAME name]].
    fn hello(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let mut protocol = None;
        if cmd.len() >= 2 {
            match parse_i64(&cmd[1]) {
                Some(2) => protocol = Some(Protocol::Resp2),
                Some(3) => protocol = Some(Protocol::Resp3),
                Some(_) => {
                    out.error("NOPROTO unsupported protocol version");
                    return;
                }
                None => {
                    out.error("ERR Protocol version is not an integer or out of range");
                    return;
                }
            }
        }
        let mut credentials = None;
        let mut name = None;
        let mut j = 2;
        while j < cmd.len() {
            let more = cmd.len() - 1 - j;
            if cmd[j].eq_ignore_ascii_case(b"auth") && more >= 2 {
                credentials = Some((&cmd[j + 1], &cmd[j + 2]));
                j += 3;
            } else if cmd[j].eq_ignore_ascii_case(b"setname") && more >= 1 {
                if !valid_name(&cmd[j + 1]) {
                    out.error(
                        "ERR Client names cannot contain spaces, newlines or special characters.",
                    );
                    return;
                }
                name = Some(&cmd[j + 1]);
                j += 2;
            } else {
                out.error(&format!(
                    "ERR Syntax error in HELLO option '{}'",
                    shown(&cmd[j], 128)
                ));
                return;
            }
        }
        if let Some((user, password)) = credentials {
            if self.password_fits(user, password) {
                self.authenticated = true;
            } else {
                out.error("WRONGPASS invalid username-password pair or user is disabled.");
                return;
            }
        }
        if !self.authenticated {
            out.error(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
                 HELLO AUTH <user> <pass> option can be used to authenticate the client \
                 and select the RESP protocol version at the same time",
            );
            return;
        }
        if let Some(name) = name {
            self.me.details.lock().name = shown(name, usize::MAX);
        }
        if let Some(protocol) = protocol {
            self.set_protocol(out, protocol);
        }
        out.map(7);
        out.bulk(b"server");
        out.bulk(b"redis");
        out.bulk(b"version");
        out.bulk(REDIS_VERSION.as_bytes());
        out.bulk(b"proto");
        out.integer(out.protocol.number());
        out.bulk(b"id");
        out.integer(self.me.id as i64);
        out.bulk(b"mode");
        out.bulk(b"standalone");
        out.bulk(b"role");
        out.bulk(b"master");
        out.bulk(b"modules");
        out.array(0);
    }

    /// The settings CONFIG GET shows, with their values on this node.
    fn settings(&self) -> Vec<(&'static str, String)> {
        let limits = &self.engine.inner.config.limits;
        vec![
            ("databases", "1".into()),
            ("port", self.port.to_string()),
            (
                "requirepass",
                self.shared.requirepass.clone().unwrap_or_default(),
            ),
            ("timeout", "0".into()),
            ("save", String::new()),
            ("appendonly", "no".into()),
            ("maxmemory", "0".into()),
            ("maxmemory-policy", "noeviction".into()),
            ("cluster-enabled", "no".into()),
            ("proto-max-bulk-len", limits.max_value_bytes.to_string()),
        ]
    }

    fn config_get(&self, cmd: &[Bytes], out: &mut Replies) {
        let settings = self.settings();
        // (setting, the name to answer with): a plain name is answered as
        // the client spelled it, as Redis does.
        let mut found: Vec<(&'static str, &[u8], &str)> = Vec::new();
        for pattern in &cmd[2..] {
            let plain = !pattern.iter().any(|b| b"*?[\\".contains(b));
            for (name, value) in &settings {
                if found.iter().any(|f| f.0 == *name) {
                    continue;
                }
                if plain && pattern.eq_ignore_ascii_case(name.as_bytes()) {
                    found.push((name, pattern, value));
                } else if !plain && super::glob::matches(pattern, name.as_bytes(), true) {
                    found.push((name, name.as_bytes(), value));
                }
            }
        }
        out.map(found.len());
        for (_, shown_name, value) in found {
            out.bulk(shown_name);
            out.bulk(value.as_bytes());
        }
    }

    fn client_list(&self, cmd: &[Bytes], out: &mut Replies) {
        let mut ids: Option<Vec<u64>> = None;
        let mut j = 2;
        while j < cmd.len() {
            if cmd[j].eq_ignore_ascii_case(b"type") && j + 1 < cmd.len() {
                let kind = &cmd[j + 1];
                if !kind.eq_ignore_ascii_case(b"normal") {
                    if [&b"master"[..], b"replica", b"pubsub"]
                        .iter()
                        .any(|k| kind.eq_ignore_ascii_case(k))
                    {
                        ids = Some(Vec::new());
                    } else {
                        out.error(&format!("ERR Unknown client type '{}'", shown(kind, 128)));
                        return;
                    }
                }
                j += 2;
            } else if cmd[j].eq_ignore_ascii_case(b"id") && j + 1 < cmd.len() {
                let mut list = Vec::new();
                for arg in &cmd[j + 1..] {
                    match parse_i64(arg) {
                        Some(id) if id > 0 => list.push(id as u64),
                        _ => {
                            out.error("ERR Invalid client ID");
                            return;
                        }
                    }
                }
                ids = Some(list);
                j = cmd.len();
            } else {
                out.error("ERR syntax error");
                return;
            }
        }
        let mut text = String::new();
        for client in self.shared.clients.all() {
            if ids.as_ref().is_none_or(|ids| ids.contains(&client.id)) {
                text.push_str(&client.describe());
                text.push('\n');
            }
        }
        out.verbatim(text.as_bytes());
    }

    fn client_setinfo(&self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len() != 4 {
            out.error(&arity_error("client|setinfo"));
            return;
        }
        let attribute = &cmd[2];
        let is_name = attribute.eq_ignore_ascii_case(b"lib-name");
        if !is_name && !attribute.eq_ignore_ascii_case(b"lib-ver") {
            out.error(&format!(
                "ERR Unrecognized option '{}'",
                shown(attribute, 128)
            ));
            return;
        }
        if !valid_name(&cmd[3]) {
            out.error(&format!(
                "ERR {} cannot contain spaces, newlines or special characters.",
                if is_name { "lib-name" } else { "lib-ver" }
            ));
            return;
        }
        let value = shown(&cmd[3], usize::MAX);
        let mut details = self.me.details.lock();
        if is_name {
            details.lib_name = value;
        } else {
            details.lib_ver = value;
        }
        out.simple("OK");
    }

    /// CLIENT KILL addr (the old form: +OK or an error), or with filters
    /// (ID, ADDR, LADDR, SKIPME): the number of clients killed.
    fn client_kill(&self, cmd: &[Bytes], out: &mut Replies) {
        if cmd.len() == 3 {
            let addr = shown(&cmd[2], usize::MAX);
            match self
                .shared
                .clients
                .all()
                .into_iter()
                .find(|c| c.addr.to_string() == addr)
            {
                Some(client) => {
                    client.killed.notify_one();
                    out.simple("OK");
                }
                None => out.error("ERR No such client"),
            }
            return;
        }
        let (mut id, mut addr, mut laddr, mut skip_me) = (None, None, None, true);
        let mut j = 2;
        while j < cmd.len() {
            let Some(value) = cmd.get(j + 1) else {
                out.error("ERR syntax error");
                return;
            };
            let option = &cmd[j];
            if option.eq_ignore_ascii_case(b"id") {
                match parse_i64(value) {
                    Some(n) if n > 0 => id = Some(n as u64),
                    _ => {
                        out.error("ERR client-id should be greater than 0");
                        return;
                    }
                }
            } else if option.eq_ignore_ascii_case(b"addr") {
                addr = Some(shown(value, usize::MAX));
            } else if option.eq_ignore_ascii_case(b"laddr") {
                laddr = Some(shown(value, usize::MAX));
            } else if option.eq_ignore_ascii_case(b"skipme") {
                if value.eq_ignore_ascii_case(b"yes") {
                    skip_me = true;
                } else if value.eq_ignore_ascii_case(b"no") {
                    skip_me = false;
                } else {
                    out.error("ERR syntax error");
                    return;
                }
            } else {
                out.error("ERR syntax error");
                return;
            }
            j += 2;
        }
        let mut killed = 0;
        for client in self.shared.clients.all() {
            let picked = id.is_none_or(|id| client.id == id)
                && addr.as_ref().is_none_or(|a| client.addr.to_string() == *a)
                && laddr
                    .as_ref()
                    .is_none_or(|a| client.laddr.to_string() == *a)
                && !(skip_me && client.id == self.me.id);
            if picked {
                client.killed.notify_one();
                killed += 1;
            }
        }
        out.integer(killed);
    }
}

/// CONFIG SET: no setting of SplitKV changes at run time.
fn config_set(cmd: &[Bytes], out: &mut Replies) {
    if !cmd.len().is_multiple_of(2) {
        out.error(&arity_error("config|set"));
        return;
    }
    let name = shown(&cmd[2], 128).to_ascii_lowercase();
    const KNOWN: &[&str] = &[
        "databases",
        "port",
        "requirepass",
        "timeout",
        "save",
        "appendonly",
        "maxmemory",
        "maxmemory-policy",
        "cluster-enabled",
        "proto-max-bulk-len",
    ];
    if KNOWN.contains(&name.as_str()) {
        out.error(&format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - SplitKV cannot change \
             it at run time; set it when starting the compute node"
        ));
    } else {
        out.error(&format!(
            "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
        ));
    }
}

/// COMMAND and its subcommands, from the command table.
fn command(kind: Kind, cmd: &[Bytes], out: &mut Replies) {
    match kind {
        Kind::CommandCount => out.integer(COMMANDS.len() as i64),
        Kind::CommandList => {
            out.array(COMMANDS.len());
            for entry in COMMANDS {
                out.bulk(entry.name.as_bytes());
            }
        }
        Kind::CommandInfo if cmd.len() > 2 => {
            out.array(cmd.len() - 2);
            for name in &cmd[2..] {
                match lookup_full(name) {
                    Some(entry) => command_entry(out, entry),
                    None => out.null(),
                }
            }
        }
        Kind::CommandDocs if cmd.len() > 2 => {
            let found: Vec<_> = cmd[2..].iter().filter_map(|n| lookup_full(n)).collect();
            out.map(found.len());
            for entry in found {
                out.bulk(entry.name.as_bytes());
                command_docs(out, entry);
            }
        }
        Kind::CommandDocs => {
            out.map(COMMANDS.len());
            for entry in COMMANDS {
                out.bulk(entry.name.as_bytes());
                command_docs(out, entry);
            }
        }
        _ => {
            out.array(COMMANDS.len());
            for entry in COMMANDS {
                command_entry(out, entry);
            }
        }
    }
}

/// One command as COMMAND INFO describes it (Redis 7's ten fields).
fn command_entry(out: &mut Replies, entry: &CommandInfo) {
    out.array(10);
    out.bulk(entry.name.as_bytes());
    out.integer(entry.arity);
    out.set(entry.flags.len());
    for flag in entry.flags {
        out.simple(flag);
    }
    out.integer(entry.keys.0);
    out.integer(entry.keys.1);
    out.integer(entry.keys.2);
    out.set(entry.categories.len());
    for category in entry.categories {
        out.simple(category);
    }
    out.set(entry.tips.len());
    for tip in entry.tips {
        out.bulk(tip.as_bytes());
    }
    out.set(entry.key_specs.len());
    for spec in entry.key_specs {
        out.map(3 + usize::from(spec.notes.is_some()));
        if let Some(notes) = spec.notes {
            out.bulk(b"notes");
            out.bulk(notes.as_bytes());
        }
        out.bulk(b"flags");
        out.set(spec.flags.len());
        for flag in spec.flags {
            out.simple(flag);
        }
        out.bulk(b"begin_search");
        out.map(2);
        out.bulk(b"type");
        out.bulk(b"index");
        out.bulk(b"spec");
        out.map(1);
        out.bulk(b"index");
        out.integer(spec.begin_index);
        out.bulk(b"find_keys");
        out.map(2);
        out.bulk(b"type");
        out.bulk(b"range");
        out.bulk(b"spec");
        out.map(3);
        out.bulk(b"lastkey");
        out.integer(spec.last_key);
        out.bulk(b"keystep");
        out.integer(spec.key_step);
        out.bulk(b"limit");
        out.integer(spec.limit);
    }
    out.set(entry.subcommands.len());
    for sub in entry.subcommands {
        command_entry(out, sub);
    }
}

/// One command as COMMAND DOCS describes it (without argument lists).
fn command_docs(out: &mut Replies, entry: &CommandInfo) {
    let docs = &entry.docs;
    let subcommands = !entry.subcommands.is_empty();
    out.map(3 + usize::from(docs.complexity.is_some()) + usize::from(subcommands));
    out.bulk(b"summary");
    out.bulk(docs.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(docs.since.as_bytes());
    out.bulk(b"group");
    out.bulk(docs.group.as_bytes());
    if let Some(complexity) = docs.complexity {
        out.bulk(b"complexity");
        out.bulk(complexity.as_bytes());
    }
    if subcommands {
        out.bulk(b"subcommands");
        out.map(entry.subcommands.len());
        for sub in entry.subcommands {
            out.bulk(sub.name.as_bytes());
            command_docs(out, sub);
        }
    }
}
