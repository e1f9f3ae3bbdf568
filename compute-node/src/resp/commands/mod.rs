//! How a pipelined batch of commands is carried out, and what each command
//! answers: reply for reply what Redis 7 answers, in the connection's
//! protocol version.
//!
//! A batch runs in the order the client sent it. Runs of consecutive SETs
//! are sent to the storage node together (through the client's partition,
//! whose requests it shares with the partition's other clients, so they
//! take effect in order) and answered when all are acknowledged;
//! runs of consecutive GETs are resolved together (one round trip for what
//! the windows do not hold). A command that follows a run starts only when
//! the run has finished, so a GET sees every SET sent before it.
//!
//! Every command is checked as Redis checks it, in Redis's order: an
//! unknown command or subcommand, then the arity, then authentication;
//! inside MULTI a command that fails these checks marks the transaction so
//! that EXEC aborts, and any other is queued.
//!
//! This module holds the batch loop, the checks and the dispatch; the
//! commands themselves are grouped as Redis's documentation groups them:
//! `connection` (AUTH, HELLO, CLIENT, RESET, SELECT), `server` (CONFIG,
//! COMMAND, INFO, TIME), `keyspace` (DEL, EXISTS, TYPE, RENAME, COPY,
//! DBSIZE, SCAN, KEYS, RANDOMKEY), `strings` (GET, SET, MGET, MSET and the
//! rest of the string family), `counters` (INCR and its kin), `ttl`
//! (EXPIRE, TTL, PERSIST and their kin) and `transaction` (MULTI, EXEC,
//! DISCARD, WATCH).

mod blocked_keys;
mod blocking;
mod collections;
mod connection;
mod counters;
mod data_types;
mod expiry_args;
mod hashes;
mod key_locks;
mod keyspace;
mod lists;
mod overlay;
mod replication;
mod server;
mod sets;
mod sorted_set_args;
mod sorted_sets;
mod strings;
mod transaction;
mod ttl;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use splitkv_common::message::WireError;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::clients::{ClientEntry, ClientRegistry};
use super::reply::{ErrorReply, Replies};
use super::table::{CommandInfo, Kind, lookup};
use crate::datatypes::{DecodeError, WRONG_TYPE, stored_string, string_of};
use crate::{Engine, EngineError, expiry};
pub use blocked_keys::BlockedKeys;
use expiry_args::TimeUnit;
pub use key_locks::KeyLocks;
use overlay::{Known, Overlay};

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
pub struct ServerState {
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
    /// The per-key stripes that make read-modify-write commands atomic per
    /// key (see [`KeyLocks`]).
    pub key_locks: KeyLocks,
    /// The thresholds at which collections leave their compact encodings
    /// (CONFIG SET `hash-max-listpack-entries` and the rest).
    pub encoding_limits: parking_lot::RwLock<crate::datatypes::EncodingLimits>,
    /// The clients blocked on keys (BLPOP and its kin).
    pub blocked: BlockedKeys,
}

/// One RESP client's state.
pub struct RespClient<'a> {
    /// The engine.
    pub engine: &'a Engine,
    /// The partition this client's writes go to (so they stay in order).
    pub partition: usize,
    /// The server's settings.
    pub shared: &'a ServerState,
    /// This connection's entry in the client registry.
    pub me: &'a ClientEntry,
    /// True once authenticated (or when no password is set).
    pub authenticated: bool,
    /// The port the server listens on (CONFIG GET port).
    pub port: u16,
    reply_mode: ReplyMode,
    multi: Option<Transaction>,
    /// Watched keys with the sequence number each had at WATCH.
    watched: Vec<(Bytes, Option<transaction::KeyVersion>)>,
    /// This client's share of the EXEC gate while one of its commands runs.
    gate: Option<tokio::sync::RwLockReadGuard<'a, ()>>,
    /// The transaction's writes while EXEC carries out the queued commands
    /// (holding the gate exclusively); `None` outside EXEC.
    overlay: Option<Overlay>,
    /// The client's socket, watched while the client blocks (BLPOP) so
    /// that a client that goes away leaves nothing behind.
    peer_fd: Option<std::os::fd::RawFd>,
}

/// Why a command failed: the storage round trip, or the key's value.
#[derive(Debug)]
pub(super) enum CommandError {
    /// The engine could not read or write.
    Engine(EngineError),
    /// The key holds a value of another type.
    WrongType,
    /// The key's stored value does not parse.
    Corrupt(DecodeError),
}

impl From<EngineError> for CommandError {
    fn from(err: EngineError) -> Self {
        CommandError::Engine(err)
    }
}

impl From<DecodeError> for CommandError {
    fn from(err: DecodeError) -> Self {
        CommandError::Corrupt(err)
    }
}

/// An error a command answers with.
pub(super) trait AnswerError {
    /// Answers the error into `out`, worded as Redis words it.
    fn answer(&self, out: &mut Replies);
}

impl AnswerError for EngineError {
    fn answer(&self, out: &mut Replies) {
        if matches!(self, EngineError::ReadOnly) {
            out.error(replication::READ_ONLY_REPLICA);
            return;
        }
        match self.wire() {
            Some(WireError::Fenced { .. }) => out
                .error("READONLY this compute node was fenced by a newer writer; it can only read"),
            Some(WireError::NotAWriter) => out.error(replication::READ_ONLY_REPLICA),
            Some(WireError::TooLarge { .. } | WireError::EmptyKey) => {
                out.error(&format!("ERR {self}"))
            }
            _ => out.error(&format!("ERR storage: {self}")),
        }
    }
}

impl AnswerError for CommandError {
    fn answer(&self, out: &mut Replies) {
        match self {
            CommandError::Engine(err) => err.answer(out),
            CommandError::WrongType => out.error(WRONG_TYPE),
            CommandError::Corrupt(err) => out.error(&format!("ERR {err}")),
        }
    }
}

/// Answers `err`.
fn fail(out: &mut Replies, err: &impl AnswerError) {
    err.answer(out);
}

/// A put of the string `value` under `key`, never expiring.
fn put_string(key: Bytes, value: Bytes) -> KeyWrite {
    KeyWrite::put(key, stored_string(value))
}

/// A put of the string `value` under `key`, expiring at `expire_at_ms`
/// (absolute Unix milliseconds, 0 for never).
fn put_string_expiring(key: Bytes, value: Bytes, expire_at_ms: u64) -> KeyWrite {
    KeyWrite::put_expiring(key, stored_string(value), expire_at_ms)
}

/// Writes `out` to `writer` once it holds [`FLUSH_BYTES`] or more.
async fn flush_if_full<W: AsyncWrite + Unpin>(
    out: &mut Replies,
    writer: &mut W,
) -> std::io::Result<()> {
    if out.pending_bytes() >= FLUSH_BYTES {
        write_replies(out, writer).await?;
    }
    Ok(())
}

/// Parts written per vectored write at most.
const WRITE_PARTS: usize = 64;

/// Writes every reply waiting in `out` to `writer`: one write of the
/// buffer, or vectored writes of its parts when values are shared.
pub async fn write_replies<W: AsyncWrite + Unpin>(
    out: &mut Replies,
    writer: &mut W,
) -> std::io::Result<()> {
    if out.is_contiguous() {
        writer.write_all(&out.bytes).await?;
        out.bytes.clear();
        return Ok(());
    }
    let mut parts = out.take_parts();
    let mut first = 0;
    while first < parts.len() {
        let mut written = {
            let mut slices = [std::io::IoSlice::new(&[]); WRITE_PARTS];
            let mut n = 0;
            for (slice, part) in slices.iter_mut().zip(&parts[first..]) {
                *slice = std::io::IoSlice::new(part);
                n += 1;
            }
            writer.write_vectored(&slices[..n]).await?
        };
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while written > 0 && first < parts.len() {
            let part = &mut parts[first];
            let n = written.min(part.len());
            bytes::Buf::advance(part, n);
            written -= n;
            if part.is_empty() {
                first += 1;
            }
        }
    }
    out.return_parts(parts);
    Ok(())
}

/// Why a command cannot run as sent: the error Redis answers.
fn rejection(cmd: &[Bytes]) -> Result<&'static CommandInfo, ErrorReply> {
    let Some(entry) = lookup(&cmd[0]) else {
        return Err(unknown_command(cmd).into());
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
                )
                .into());
            }
        }
    };
    if !entry.arity_allows(cmd.len()) {
        return Err(arity_error(entry.name).into());
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

/// An integer argument as Redis's `string2ll` reads it.
fn parse_i64(arg: &[u8]) -> Option<i64> {
    crate::datatypes::parse_integer(arg)
}

/// One write a command makes to a key: a put of a value and when it
/// expires (absolute Unix milliseconds, 0 for never), or a delete.
pub(super) type KeyWrite = crate::KeyWrite<Bytes>;

impl<'a> RespClient<'a> {
    /// A client that has not yet sent anything.
    pub fn new(
        engine: &'a Engine,
        shared: &'a ServerState,
        me: &'a ClientEntry,
        port: u16,
    ) -> Self {
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
            overlay: None,
            peer_fd: None,
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
                    .map_or(i.saturating_add(most).min(batch.len()), |n| i + n);
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
                    self.get_run(&keys, false, out).await;
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

    /// Answers each of `run` (plain `SET key value` commands): the run goes
    /// to the storage node through the client's partition, together with
    /// the runs of the partition's other clients that arrive meanwhile, in
    /// one request unless its values are large ([`Engine::put_each_async`]),
    /// so they take effect in order at the cost of one round trip.
    async fn set_run<'c>(
        &self,
        run: impl ExactSizeIterator<Item = &'c [Bytes]>,
        out: &mut Replies,
    ) {
        let pairs = run
            .map(|cmd| (cmd[1].clone(), stored_string(cmd[2].clone())))
            .collect();
        for result in self.engine.put_each_async(self.partition, pairs).await {
            match result {
                Ok(()) => out.simple("OK"),
                Err(e) => fail(out, &e),
            }
        }
    }

    /// Answers each of `keys` as a GET does (or as MGET does, with
    /// `collection_is_null`: a key holding a collection answers null
    /// instead of WRONGTYPE): one round trip for what the windows do not
    /// hold; one key's failure fails only its reply. Inside EXEC the
    /// transaction's own writes are seen.
    async fn get_run(&self, keys: &[&[u8]], collection_is_null: bool, out: &mut Replies) {
        if self.overlay.is_some() {
            for key in keys {
                match self.value(key).await {
                    Ok(value) => out.bulk_or_null(value.as_deref()),
                    Err(CommandError::WrongType) if collection_is_null => out.null(),
                    Err(e) => fail(out, &e),
                }
            }
            return;
        }
        // ServerState values leave the reply buffer: only replies that cannot be
        // cut off again (CLIENT REPLY OFF or SKIP) may share them.
        let share = self.reply_mode == ReplyMode::On;
        for stored in self.engine.get_each_async(keys).await {
            let value = match stored.map(|stored| stored.map(string_of)) {
                Ok(None) => None,
                Ok(Some(Some(value))) => Some(value),
                Ok(Some(None)) if collection_is_null => None,
                Ok(Some(None)) => {
                    out.error(WRONG_TYPE);
                    continue;
                }
                Err(e) => {
                    fail(out, &e);
                    continue;
                }
            };
            if share {
                out.bulk_shared_or_null(value.as_ref());
            } else {
                out.bulk_or_null(value.as_deref());
            }
        }
    }

    /// Writes the replies out once [`FLUSH_BYTES`] wait, in the middle of a
    /// long reply, letting go of the EXEC gate meanwhile; inside EXEC, or
    /// with replies off, they wait for the end.
    pub(super) async fn write_early<W: AsyncWrite + Unpin>(
        &mut self,
        out: &mut Replies,
        writer: &mut W,
    ) -> std::io::Result<()> {
        if self.reply_mode == ReplyMode::On
            && self.overlay.is_none()
            && out.pending_bytes() >= FLUSH_BYTES
        {
            let shared = self.gate.take().is_some();
            flush_if_full(out, writer).await?;
            if shared {
                self.gate = Some(self.shared.exec_gate.read().await);
            }
        }
        Ok(())
    }

    /// The string value of `key` as this client sees it (inside EXEC,
    /// with the transaction's writes); [`CommandError::WrongType`] if it
    /// holds a collection.
    async fn value(&self, key: &[u8]) -> Result<Option<Bytes>, CommandError> {
        Ok(self.entry(key).await?.map(|(value, _)| value))
    }

    /// The string value of `key` and when it expires (absolute Unix
    /// milliseconds, 0 for never), as this client sees it;
    /// [`CommandError::WrongType`] if it holds a collection.
    async fn entry(&self, key: &[u8]) -> Result<Option<(Bytes, u64)>, CommandError> {
        match self.stored_entry(key).await? {
            None => Ok(None),
            Some((stored, at)) => match string_of(stored) {
                Some(value) => Ok(Some((value, at))),
                None => Err(CommandError::WrongType),
            },
        }
    }

    /// The stored value of `key` (a string or a collection, as
    /// [`crate::datatypes`] lays them out) and when it expires, as this
    /// client sees it.
    async fn stored_entry(&self, key: &[u8]) -> Result<Option<(Bytes, u64)>, EngineError> {
        if let Some(overlay) = &self.overlay
            && let Known::Written(written) = overlay.known(key)
        {
            return Ok(written.filter(|&(_, at)| !expiry::time_has_passed(at, expiry::now_ms())));
        }
        self.engine.get_expiring_async(key).await
    }

    /// When `key` expires, as this client sees it: `None` if it has no
    /// value, `Some(0)` if it never expires.
    fn expire_at_ms(&self, key: &[u8]) -> Option<u64> {
        if let Some(overlay) = &self.overlay
            && let Known::Written(written) = overlay.known(key)
        {
            return written
                .map(|(_, at)| at)
                .filter(|&at| !expiry::time_has_passed(at, expiry::now_ms()));
        }
        self.engine.expire_at_ms(key)
    }

    /// Holds the stripes of `keys` (see [`KeyLocks`]) for a command that
    /// reads them and writes them back; inside EXEC none are needed, since
    /// EXEC runs alone.
    async fn lock_keys(&self, keys: &[Bytes]) -> Option<key_locks::KeyGuards<'a>> {
        if self.overlay.is_some() {
            return None;
        }
        Some(self.shared.key_locks.lock(keys).await)
    }

    /// The largest value the node stores (what CONFIG GET
    /// proto-max-bulk-len reports).
    fn max_value_bytes(&self) -> usize {
        self.engine.limits().max_value_bytes
    }

    /// True if `key` has a value, as this client sees it.
    fn key_exists(&self, key: &[u8]) -> bool {
        self.expire_at_ms(key).is_some()
    }

    /// Applies `writes` as one unit: through the client's partition, or
    /// inside EXEC into the transaction, which sends all its writes
    /// together when it ends.
    async fn write(&mut self, writes: Vec<KeyWrite>) -> Result<(), EngineError> {
        if let Some(overlay) = &mut self.overlay {
            for write in writes {
                overlay.write(write);
            }
            return Ok(());
        }
        let woken = self.shared.blocked.keys_to_wake(&writes);
        self.engine.write_async(self.partition, writes).await?;
        self.shared.blocked.written(&woken);
        Ok(())
    }

    /// Lets blocking commands watch the client's socket `fd` for its peer
    /// going away.
    pub fn watch_peer(&mut self, fd: std::os::fd::RawFd) {
        self.peer_fd = Some(fd);
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
            // SKIP holds while the skipped command runs, so that a long
            // reply is not written out in part.
            ReplyMode::Off | ReplyMode::SkipNext => true,
        };
        let mark = out.bytes.len();
        // EXEC takes the gate exclusively itself.
        if !cmd[0].eq_ignore_ascii_case(b"exec") {
            self.gate = Some(self.shared.exec_gate.read().await);
        }
        let flow = self.checked(cmd, out, writer).await;
        self.gate = None;
        if suppress && !is_client_reply && self.reply_mode == ReplyMode::SkipNext {
            self.reply_mode = ReplyMode::On;
        }
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
            if !self.authenticated && !entry.flags.contains(&"no_auth") {
                Err("NOAUTH Authentication required.".into())
            } else if !self.engine.is_writer() && entry.flags.contains(&"write") {
                // As Redis's `processCommand` refuses writes on a read-only
                // replica (inside MULTI too, which then aborts EXEC).
                Err(replication::READ_ONLY_REPLICA.into())
            } else {
                Ok(entry)
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
            Kind::Get => self.get_run(&[&cmd[1][..]], false, out).await,
            Kind::Set => self.set(cmd, out).await,
            Kind::Mget => self.mget(cmd, out, writer).await?,
            Kind::Mset => self.mset(cmd, out).await,
            Kind::Del | Kind::Unlink => self.del(cmd, out).await,
            Kind::Type => self.key_type(cmd, out).await,
            Kind::Rename | Kind::Renamenx => {
                self.rename(cmd, entry.kind == Kind::Renamenx, out).await;
            }
            Kind::Copy => self.copy(cmd, out).await,
            Kind::Exists | Kind::Touch => self.exists(cmd, out),
            Kind::Dbsize => out.integer(match &self.overlay {
                Some(overlay) => overlay.len(self.engine),
                None => self.engine.len(),
            } as i64),
            Kind::Flushall | Kind::Flushdb => self.flush(cmd, out).await,
            Kind::Scan => self.scan(cmd, out).await,
            Kind::Keys => self.keys(cmd, out, writer).await?,
            Kind::Randomkey => self.random_key(out),
            Kind::Ping => match cmd.len() {
                1 => out.simple("PONG"),
                2 => out.bulk(&cmd[1]),
                _ => out.error(&arity_error("ping")),
            },
            Kind::Echo => out.bulk(&cmd[1]),
            Kind::Quit => {
                out.simple("OK");
                return Ok(Flow::Close);
            }
            Kind::Auth => self.auth(cmd, out),
            Kind::Hello => self.hello(cmd, out),
            Kind::Select => self.select(cmd, out),
            Kind::Reset => self.reset(out),
            Kind::ClientId
            | Kind::ClientSetname
            | Kind::ClientGetname
            | Kind::ClientInfo
            | Kind::ClientList
            | Kind::ClientSetinfo
            | Kind::ClientKill
            | Kind::ClientNoEvict
            | Kind::ClientNoTouch
            | Kind::ClientReply => self.client(entry.kind, cmd, out),
            Kind::Info => self.info(cmd, out).await,
            Kind::Role => self.role(out),
            Kind::Replicaof => self.replicaof(cmd, out).await,
            Kind::Time => server::time(out),
            Kind::Command
            | Kind::CommandCount
            | Kind::CommandDocs
            | Kind::CommandInfo
            | Kind::CommandList => server::command(entry.kind, cmd, out),
            Kind::ConfigGet => self.config_get(cmd, out),
            Kind::ConfigSet => self.config_set(cmd, out),
            Kind::ConfigResetstat => {
                self.shared.commands_processed.store(0, Ordering::Relaxed);
                out.simple("OK");
            }
            Kind::Multi => self.multi(out),
            Kind::Exec => return self.exec(out, writer).await,
            Kind::Discard => self.discard(out),
            Kind::Watch => self.watch(cmd, out),
            Kind::Unwatch => {
                self.watched.clear();
                out.simple("OK");
            }
            Kind::Setnx => self.setnx(cmd, out).await,
            Kind::Getset => self.getset(cmd, out).await,
            Kind::Getdel => self.getdel(cmd, out).await,
            Kind::Msetnx => self.msetnx(cmd, out).await,
            Kind::Strlen => self.strlen(cmd, out).await,
            Kind::Append => self.append(cmd, out).await,
            Kind::Getrange => self.getrange(cmd, out).await,
            Kind::Setrange => self.setrange(cmd, out).await,
            Kind::Lcs => self.lcs(cmd, out).await,
            Kind::Incr => self.incr_by(cmd, Some(1), out).await,
            Kind::Decr => self.incr_by(cmd, Some(-1), out).await,
            Kind::Incrby => self.incr_by(cmd, None, out).await,
            Kind::Decrby => self.decr_by(cmd, out).await,
            Kind::Incrbyfloat => self.incr_by_float(cmd, out).await,
            Kind::Setex => self.setex(cmd, TimeUnit::Seconds, out).await,
            Kind::Psetex => self.setex(cmd, TimeUnit::Milliseconds, out).await,
            Kind::Getex => self.getex(cmd, out).await,
            Kind::Expire => self.expire(cmd, TimeUnit::Seconds, false, out).await,
            Kind::Pexpire => self.expire(cmd, TimeUnit::Milliseconds, false, out).await,
            Kind::Expireat => self.expire(cmd, TimeUnit::Seconds, true, out).await,
            Kind::Pexpireat => self.expire(cmd, TimeUnit::Milliseconds, true, out).await,
            Kind::Ttl => self.ttl(cmd, TimeUnit::Seconds, false, out),
            Kind::Pttl => self.ttl(cmd, TimeUnit::Milliseconds, false, out),
            Kind::Expiretime => self.ttl(cmd, TimeUnit::Seconds, true, out),
            Kind::Pexpiretime => self.ttl(cmd, TimeUnit::Milliseconds, true, out),
            Kind::Persist => self.persist(cmd, out).await,
            Kind::ObjectEncoding
            | Kind::ObjectHelp
            | Kind::Hset
            | Kind::Hsetnx
            | Kind::Hmset
            | Kind::Hget
            | Kind::Hmget
            | Kind::Hgetall
            | Kind::Hdel
            | Kind::Hlen
            | Kind::Hexists
            | Kind::Hkeys
            | Kind::Hvals
            | Kind::Hstrlen
            | Kind::Hincrby
            | Kind::Hincrbyfloat
            | Kind::Hrandfield
            | Kind::Hscan
            | Kind::Lpush
            | Kind::Rpush
            | Kind::Lpushx
            | Kind::Rpushx
            | Kind::Lpop
            | Kind::Rpop
            | Kind::Llen
            | Kind::Lrange
            | Kind::Lindex
            | Kind::Lset
            | Kind::Linsert
            | Kind::Lrem
            | Kind::Ltrim
            | Kind::Lpos
            | Kind::Lmove
            | Kind::Rpoplpush
            | Kind::Lmpop
            | Kind::Blpop
            | Kind::Brpop
            | Kind::Blmove
            | Kind::Brpoplpush
            | Kind::Blmpop
            | Kind::Sadd
            | Kind::Srem
            | Kind::Smembers
            | Kind::Sismember
            | Kind::Smismember
            | Kind::Scard
            | Kind::Spop
            | Kind::Srandmember
            | Kind::Smove
            | Kind::Sinter
            | Kind::Sunion
            | Kind::Sdiff
            | Kind::Sinterstore
            | Kind::Sunionstore
            | Kind::Sdiffstore
            | Kind::Sintercard
            | Kind::Sscan
            | Kind::Zadd
            | Kind::Zincrby
            | Kind::Zrem
            | Kind::Zscore
            | Kind::Zmscore
            | Kind::Zcard
            | Kind::Zcount
            | Kind::Zlexcount
            | Kind::Zrange
            | Kind::Zrangestore
            | Kind::Zrevrange
            | Kind::Zrangebyscore
            | Kind::Zrevrangebyscore
            | Kind::Zrangebylex
            | Kind::Zrevrangebylex
            | Kind::Zrank
            | Kind::Zrevrank
            | Kind::Zremrangebyrank
            | Kind::Zremrangebyscore
            | Kind::Zremrangebylex
            | Kind::Zpopmin
            | Kind::Zpopmax
            | Kind::Bzpopmin
            | Kind::Bzpopmax
            | Kind::Zmpop
            | Kind::Bzmpop
            | Kind::Zunion
            | Kind::Zinter
            | Kind::Zdiff
            | Kind::Zunionstore
            | Kind::Zinterstore
            | Kind::Zdiffstore
            | Kind::Zintercard
            | Kind::Zrandmember
            | Kind::Zscan => self.data_type_command(entry.kind, cmd, out).await,
            // Containers called with no subcommand fail their arity check.
            Kind::Config | Kind::Client | Kind::Object => out.error(&arity_error(entry.name)),
        }
        Ok(Flow::Continue)
    }
}
