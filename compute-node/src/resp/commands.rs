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
use splitkv_common::client::ClientError;
use splitkv_common::message::WireError;

use super::reply;
use crate::{Engine, EngineError};

/// What `COMMAND` reports about a command, as Redis does.
struct CommandInfo {
    name: &'static str,
    /// Argument count including the name; negative means at least that many.
    arity: i64,
    flags: &'static [&'static str],
    first_key: i64,
    last_key: i64,
    key_step: i64,
}

const fn info(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    first_key: i64,
    last_key: i64,
    key_step: i64,
) -> CommandInfo {
    CommandInfo {
        name,
        arity,
        flags,
        first_key,
        last_key,
        key_step,
    }
}

const COMMANDS: &[CommandInfo] = &[
    info("get", 2, &["readonly", "fast"], 1, 1, 1),
    info("set", -3, &["write", "denyoom"], 1, 1, 1),
    info("del", -2, &["write"], 1, -1, 1),
    info("exists", -2, &["readonly", "fast"], 1, -1, 1),
    info("mget", -2, &["readonly", "fast"], 1, -1, 1),
    info("mset", -3, &["write", "denyoom"], 1, -1, 2),
    info("ping", -1, &["fast", "stale"], 0, 0, 0),
    info("echo", 2, &["fast"], 0, 0, 0),
    info("dbsize", 1, &["readonly", "fast"], 0, 0, 0),
    info("info", -1, &["random", "loading", "stale"], 0, 0, 0),
    info("command", -1, &["random", "loading", "stale"], 0, 0, 0),
    info(
        "auth",
        -2,
        &["noscript", "loading", "stale", "fast"],
        0,
        0,
        0,
    ),
    info("quit", 1, &["fast"], 0, 0, 0),
    info("select", 2, &["loading", "stale", "fast"], 0, 0, 0),
    info("config", -2, &["admin", "loading", "stale"], 0, 0, 0),
    info("client", -2, &["admin", "loading", "stale"], 0, 0, 0),
];

/// What the connection should do after a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep serving.
    Continue,
    /// Close after sending what was answered (QUIT).
    Close,
}

/// One client's state.
pub struct Session<'a> {
    /// The engine.
    pub engine: &'a Engine,
    /// The connection this client's writes use.
    pub link: usize,
    /// The password AUTH must give, if any.
    pub requirepass: Option<&'a str>,
    /// True once authenticated (or when no password is set).
    pub authenticated: bool,
    /// Extra lines for INFO (address, storage node).
    pub info: &'a str,
}

fn name_of(cmd: &[Bytes]) -> String {
    cmd.first()
        .map(|n| String::from_utf8_lossy(n).to_ascii_lowercase())
        .unwrap_or_default()
}

fn arity_ok(name: &str, argc: usize) -> bool {
    COMMANDS.iter().find(|c| c.name == name).is_none_or(|c| {
        if c.arity >= 0 {
            argc as i64 == c.arity
        } else {
            argc as i64 >= -c.arity
        }
    })
}

fn engine_error(out: &mut BytesMut, err: &EngineError) {
    match err {
        EngineError::Storage(ClientError::Storage(WireError::Fenced { .. }))
        | EngineError::Storage(ClientError::Fenced) => reply::error(
            out,
            "READONLY this compute node was fenced by a newer writer; it can only read",
        ),
        EngineError::Storage(ClientError::Storage(WireError::NotAWriter)) => {
            reply::error(out, "READONLY this compute node is a reader")
        }
        EngineError::TooLarge { .. } | EngineError::EmptyKey => {
            reply::error(out, &format!("ERR {err}"))
        }
        other => reply::error(out, &format!("ERR storage: {other}")),
    }
}

impl Session<'_> {
    /// Carries out a batch of commands in order, answering into `out`.
    pub async fn run(&mut self, batch: Vec<Vec<Bytes>>, out: &mut BytesMut) -> Flow {
        let mut i = 0;
        while i < batch.len() {
            let name = name_of(&batch[i]);
            let same_run = |cmd: &Vec<Bytes>, want: &str, argc: usize| {
                cmd.len() == argc && name_of(cmd) == want
            };
            if self.authenticated && same_run(&batch[i], "set", 3) {
                let end = (i..batch.len())
                    .find(|&j| !same_run(&batch[j], "set", 3))
                    .unwrap_or(batch.len());
                self.set_run(&batch[i..end], out).await;
                i = end;
                continue;
            }
            if self.authenticated && same_run(&batch[i], "get", 2) {
                let end = (i..batch.len())
                    .find(|&j| !same_run(&batch[j], "get", 2))
                    .unwrap_or(batch.len());
                self.get_run(&batch[i..end], out).await;
                i = end;
                continue;
            }
            if self.one(&name, &batch[i], out).await == Flow::Close {
                return Flow::Close;
            }
            i += 1;
        }
        Flow::Continue
    }

    async fn set_run(&mut self, run: &[Vec<Bytes>], out: &mut BytesMut) {
        let mut pending = Vec::with_capacity(run.len());
        for cmd in run {
            pending.push(
                self.engine
                    .start_put(self.link, cmd[1].clone(), &cmd[2])
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

    async fn get_run(&mut self, run: &[Vec<Bytes>], out: &mut BytesMut) {
        let keys: Vec<&[u8]> = run.iter().map(|cmd| &cmd[1][..]).collect();
        match self.engine.get_many_async(&keys).await {
            Ok(values) => {
                for value in values {
                    reply::bulk(out, value.as_deref());
                }
            }
            Err(_) => {
                // Answer each on its own, so one bad key fails only its GET.
                for key in keys {
                    match self.engine.get_async(key).await {
                        Ok(value) => reply::bulk(out, value.as_deref()),
                        Err(e) => engine_error(out, &e),
                    }
                }
            }
        }
    }

    async fn one(&mut self, name: &str, cmd: &[Bytes], out: &mut BytesMut) -> Flow {
        if cmd.is_empty() {
            return Flow::Continue;
        }
        if !self.authenticated && name != "auth" && name != "quit" {
            reply::error(out, "NOAUTH Authentication required.");
            return Flow::Continue;
        }
        if !arity_ok(name, cmd.len()) {
            reply::error(
                out,
                &format!("ERR wrong number of arguments for '{name}' command"),
            );
            return Flow::Continue;
        }
        match name {
            "get" => match self.engine.get_async(&cmd[1]).await {
                Ok(value) => reply::bulk(out, value.as_deref()),
                Err(e) => engine_error(out, &e),
            },
            "set" => {
                if cmd.len() > 3 {
                    reply::error(out, "ERR syntax error (SET options are not supported)");
                } else {
                    match self.engine.put_async(self.link, &cmd[1], &cmd[2]).await {
                        Ok(()) => reply::simple(out, "OK"),
                        Err(e) => engine_error(out, &e),
                    }
                }
            }
            "del" => {
                let mut removed = 0;
                for key in &cmd[1..] {
                    if !self.engine.contains(key) {
                        continue;
                    }
                    match self.engine.delete_async(self.link, key).await {
                        Ok(true) => removed += 1,
                        Ok(false) => {}
                        Err(e) => {
                            engine_error(out, &e);
                            return Flow::Continue;
                        }
                    }
                }
                reply::integer(out, removed);
            }
            "exists" => {
                let count = cmd[1..].iter().filter(|k| self.engine.contains(k)).count();
                reply::integer(out, count as i64);
            }
            "mget" => {
                let keys: Vec<&[u8]> = cmd[1..].iter().map(|k| &k[..]).collect();
                match self.engine.get_many_async(&keys).await {
                    Ok(values) => {
                        reply::array(out, values.len());
                        for value in values {
                            reply::bulk(out, value.as_deref());
                        }
                    }
                    Err(e) => engine_error(out, &e),
                }
            }
            "mset" => {
                if cmd.len().is_multiple_of(2) {
                    reply::error(out, "ERR wrong number of arguments for 'mset' command");
                } else {
                    let items: Vec<(&[u8], &[u8])> = cmd[1..]
                        .chunks(2)
                        .map(|kv| (&kv[0][..], &kv[1][..]))
                        .collect();
                    match self.engine.put_many_async(self.link, &items).await {
                        Ok(()) => reply::simple(out, "OK"),
                        Err(e) => engine_error(out, &e),
                    }
                }
            }
            "ping" => match cmd.get(1) {
                Some(message) => reply::bulk(out, Some(message)),
                None => reply::simple(out, "PONG"),
            },
            "echo" => reply::bulk(out, Some(&cmd[1])),
            "dbsize" => reply::integer(out, self.engine.len() as i64),
            "info" => {
                let text = super::info::render(self.engine, self.info);
                reply::bulk(out, Some(text.as_bytes()));
            }
            "command" => command(cmd, out),
            "auth" => self.auth(cmd, out),
            "quit" => {
                reply::simple(out, "OK");
                return Flow::Close;
            }
            "select" => {
                if &cmd[1][..] == b"0" {
                    reply::simple(out, "OK");
                } else {
                    reply::error(out, "ERR DB index is out of range");
                }
            }
            "config" => {
                // Clients probe settings at start; SplitKV has none to show.
                reply::array(out, 0);
            }
            "client" => reply::simple(out, "OK"),
            _ => {
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
        }
        Flow::Continue
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
                let name = String::from_utf8_lossy(name).to_ascii_lowercase();
                match COMMANDS.iter().find(|c| c.name == name) {
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
