//! The server commands: INFO, TIME, CONFIG and COMMAND.

use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::datatypes::EncodingLimits;

use super::{REDIS_VERSION, RespClient, arity_error, shown};
use crate::resp::command_docs::{Arg, deprecation, more_docs};
use crate::resp::reply::Replies;
use crate::resp::table::{BeginSearch, CommandInfo, FindKeys, Kind, commands, lookup_full};

/// What `fetch` answers if `shown`, for INFO (a failure is logged and
/// shown as nothing: `what` names the storage node's figures).
async fn if_shown<T, E: std::fmt::Display>(
    shown: bool,
    what: &str,
    fetch: impl std::future::Future<Output = Result<T, E>>,
) -> Option<T> {
    if !shown {
        return None;
    }
    match fetch.await {
        Ok(value) => Some(value),
        Err(e) => {
            tracing::debug!("INFO without the storage node's {what}: {e}");
            None
        }
    }
}

impl RespClient<'_> {
    /// INFO [section...].
    pub(super) async fn info(&self, cmd: &[Bytes], out: &mut Replies) {
        let shared = self.shared;
        let wanted: Vec<String> = cmd[1..]
            .iter()
            .map(|s| shown(s, 64).to_ascii_lowercase())
            .collect();
        // A reader's lag and the storage node's space and collection
        // figures each need a round trip to the storage node, made only when
        // their section is shown; without an answer the section shows what
        // this node knows.
        let replication = if_shown(
            crate::resp::info::shows("replication", &wanted),
            "replication figures",
            self.engine.replication_async(),
        )
        .await;
        let storage_stats = if_shown(
            crate::resp::info::shows("splitkv", &wanted),
            "figures",
            self.engine.storage_stats_async(),
        )
        .await;
        let facts = crate::resp::info::ServerFacts {
            redis_version: REDIS_VERSION,
            tcp_port: self.port,
            storage: &shared.storage,
            connected_clients: shared.clients.len(),
            blocked_clients: shared.blocked.blocked_clients(),
            total_connections: shared.clients.total_registered(),
            total_commands: shared.commands_processed.load(Ordering::Relaxed),
            uptime_seconds: shared.started.elapsed().as_secs(),
            replication: replication.as_ref(),
            storage_stats: storage_stats.as_ref(),
        };
        let text = crate::resp::info::render(self.engine, &facts, &wanted);
        out.verbatim(text.as_bytes());
    }

    /// The settings CONFIG GET shows, with their values on this node.
    pub(super) fn settings(&self) -> Vec<(&'static str, String)> {
        let limits = self.engine.limits();
        let mut settings = vec![
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
        ];
        let encodings = self.encoding_limits();
        for (name, value) in ENCODING_SETTINGS
            .iter()
            .map(|&(name, field)| (name, field.get(&encodings)))
        {
            settings.push((name, value.to_string()));
        }
        settings
    }

    pub(super) fn config_get(&self, cmd: &[Bytes], out: &mut Replies) {
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
                } else if !plain && crate::resp::glob::matches(pattern, name.as_bytes(), true) {
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
}

/// TIME: seconds and microseconds of the Unix time.
pub(super) fn time(out: &mut Replies) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    out.array(2);
    out.bulk(now.as_secs().to_string().as_bytes());
    out.bulk(now.subsec_micros().to_string().as_bytes());
}

/// A collection encoding threshold CONFIG can read and change.
#[derive(Debug, Clone, Copy)]
enum EncodingSetting {
    HashEntries,
    HashValue,
    SetIntsetEntries,
    ZsetEntries,
    ZsetValue,
    ListSize,
}

impl EncodingSetting {
    fn get(self, limits: &EncodingLimits) -> i64 {
        match self {
            EncodingSetting::HashEntries => limits.hash_max_entries as i64,
            EncodingSetting::HashValue => limits.hash_max_value_bytes as i64,
            EncodingSetting::SetIntsetEntries => limits.set_max_intset_entries as i64,
            EncodingSetting::ZsetEntries => limits.zset_max_entries as i64,
            EncodingSetting::ZsetValue => limits.zset_max_value_bytes as i64,
            EncodingSetting::ListSize => limits.list_max_listpack_size,
        }
    }

    /// Sets `value`, or says why it is out of range.
    fn set(self, limits: &mut EncodingLimits, value: i64) -> Result<(), &'static str> {
        if let EncodingSetting::ListSize = self {
            if value == 0 || value < -5 {
                return Err("argument must be between -5 and -1 or a positive count");
            }
            limits.list_max_listpack_size = value;
            return Ok(());
        }
        let Ok(value) = usize::try_from(value) else {
            return Err("argument must be a memory or percent value");
        };
        match self {
            EncodingSetting::HashEntries => limits.hash_max_entries = value,
            EncodingSetting::HashValue => limits.hash_max_value_bytes = value,
            EncodingSetting::SetIntsetEntries => limits.set_max_intset_entries = value,
            EncodingSetting::ZsetEntries => limits.zset_max_entries = value,
            EncodingSetting::ZsetValue => limits.zset_max_value_bytes = value,
            EncodingSetting::ListSize => {}
        }
        Ok(())
    }
}

/// The encoding thresholds by their Redis 7.0 names (the `ziplist` names
/// are Redis's aliases).
const ENCODING_SETTINGS: &[(&str, EncodingSetting)] = &[
    ("hash-max-listpack-entries", EncodingSetting::HashEntries),
    ("hash-max-ziplist-entries", EncodingSetting::HashEntries),
    ("hash-max-listpack-value", EncodingSetting::HashValue),
    ("hash-max-ziplist-value", EncodingSetting::HashValue),
    ("set-max-intset-entries", EncodingSetting::SetIntsetEntries),
    ("zset-max-listpack-entries", EncodingSetting::ZsetEntries),
    ("zset-max-ziplist-entries", EncodingSetting::ZsetEntries),
    ("zset-max-listpack-value", EncodingSetting::ZsetValue),
    ("zset-max-ziplist-value", EncodingSetting::ZsetValue),
    ("list-max-listpack-size", EncodingSetting::ListSize),
    ("list-max-ziplist-size", EncodingSetting::ListSize),
];

/// Settings CONFIG GET shows that are fixed when the compute node starts.
const FIXED_SETTINGS: &[&str] = &[
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

impl RespClient<'_> {
    /// CONFIG SET name value [name value ...]: the collection encoding
    /// thresholds change (all or none); the other settings SplitKV shows
    /// are fixed at start.
    pub(super) fn config_set(&self, cmd: &[Bytes], out: &mut Replies) {
        if !cmd.len().is_multiple_of(2) {
            out.error(&arity_error("config|set"));
            return;
        }
        let mut changed = *self.shared.encoding_limits.read();
        for pair in cmd[2..].chunks(2) {
            let name = shown(&pair[0], 128).to_ascii_lowercase();
            if let Some(&(_, setting)) = ENCODING_SETTINGS.iter().find(|(n, _)| *n == name) {
                let result = match super::parse_i64(&pair[1]) {
                    None => Err("argument couldn't be parsed into an integer"),
                    Some(value) => setting.set(&mut changed, value),
                };
                if let Err(why) = result {
                    out.error(&format!(
                        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
                    ));
                    return;
                }
            } else if FIXED_SETTINGS.contains(&name.as_str()) {
                out.error(&format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name}') - SplitKV cannot change \
                     it at run time; set it when starting the compute node"
                ));
                return;
            } else {
                out.error(&format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                ));
                return;
            }
        }
        *self.shared.encoding_limits.write() = changed;
        out.simple("OK");
    }
}

/// COMMAND and its subcommands, from the command table.
pub(super) fn command(kind: Kind, cmd: &[Bytes], out: &mut Replies) {
    match kind {
        Kind::CommandCount => out.integer(commands().len() as i64),
        Kind::CommandList => {
            out.array(commands().len());
            for entry in commands() {
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
            out.map(commands().len());
            for entry in commands() {
                out.bulk(entry.name.as_bytes());
                command_docs(out, entry);
            }
        }
        _ => {
            out.array(commands().len());
            for entry in commands() {
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
        begin_search(out, &spec.begin_search);
        out.bulk(b"find_keys");
        find_keys(out, &spec.find_keys);
    }
    out.set(entry.subcommands.len());
    for sub in entry.subcommands {
        command_entry(out, sub);
    }
}

/// Where a key specification's search begins, as Redis's
/// `addReplyCommandKeySpecs` writes it: `type` and `spec`.
fn begin_search(out: &mut Replies, search: &BeginSearch) {
    out.map(2);
    out.bulk(b"type");
    match search {
        BeginSearch::Index(pos) => {
            out.bulk(b"index");
            out.bulk(b"spec");
            out.map(1);
            out.bulk(b"index");
            out.integer(*pos);
        }
        BeginSearch::Keyword { keyword, startfrom } => {
            out.bulk(b"keyword");
            out.bulk(b"spec");
            out.map(2);
            out.bulk(b"keyword");
            out.bulk(keyword.as_bytes());
            out.bulk(b"startfrom");
            out.integer(*startfrom);
        }
        BeginSearch::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
}

/// How a key specification's keys are found, as Redis's
/// `addReplyCommandKeySpecs` writes it: `type` and `spec`.
fn find_keys(out: &mut Replies, find: &FindKeys) {
    out.map(2);
    out.bulk(b"type");
    match *find {
        FindKeys::Range {
            lastkey,
            keystep,
            limit,
        } => {
            out.bulk(b"range");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"lastkey");
            out.integer(lastkey);
            out.bulk(b"keystep");
            out.integer(keystep);
            out.bulk(b"limit");
            out.integer(limit);
        }
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => {
            out.bulk(b"keynum");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"keynumidx");
            out.integer(keynumidx);
            out.bulk(b"firstkey");
            out.integer(firstkey);
            out.bulk(b"keystep");
            out.integer(keystep);
        }
        FindKeys::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
}

/// One command as COMMAND DOCS describes it, fields in Redis's order.
fn command_docs(out: &mut Replies, entry: &CommandInfo) {
    let docs = &entry.docs;
    let more = more_docs(entry.name);
    let history = more.map_or(&[][..], |m| m.history);
    let arguments = more.map_or(&[][..], |m| m.arguments);
    let subcommands = !entry.subcommands.is_empty();
    let deprecated = deprecation(entry.name);
    out.map(
        3 + usize::from(docs.complexity.is_some())
            + if deprecated.is_some() { 3 } else { 0 }
            + usize::from(!history.is_empty())
            + usize::from(!arguments.is_empty())
            + usize::from(subcommands),
    );
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
    if let Some(notice) = deprecated {
        out.bulk(b"doc_flags");
        out.set(notice.doc_flags.len());
        for flag in notice.doc_flags {
            out.simple(flag);
        }
        out.bulk(b"deprecated_since");
        out.bulk(notice.since.as_bytes());
        out.bulk(b"replaced_by");
        out.bulk(notice.replaced_by.as_bytes());
    }
    if !history.is_empty() {
        out.bulk(b"history");
        out.set(history.len());
        for (version, change) in history {
            out.array(2);
            out.bulk(version.as_bytes());
            out.bulk(change.as_bytes());
        }
    }
    if !arguments.is_empty() {
        out.bulk(b"arguments");
        argument_docs(out, arguments);
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

/// An argument list as COMMAND DOCS describes it (Redis's
/// `addReplyCommandArgList`): each argument a map, fields in Redis's order.
fn argument_docs(out: &mut Replies, arguments: &[Arg]) {
    out.array(arguments.len());
    for arg in arguments {
        let nested = matches!(arg.kind, "oneof" | "block");
        let texts = [
            ("token", arg.token),
            ("summary", arg.summary),
            ("since", arg.since),
            ("deprecated_since", arg.deprecated_since),
        ];
        out.map(
            2 + usize::from(arg.key_spec_index.is_some())
                + texts.iter().filter(|(_, text)| text.is_some()).count()
                + usize::from(!arg.flags.is_empty())
                + usize::from(nested),
        );
        out.bulk(b"name");
        out.bulk(arg.name.as_bytes());
        out.bulk(b"type");
        out.bulk(arg.kind.as_bytes());
        if let Some(index) = arg.key_spec_index {
            out.bulk(b"key_spec_index");
            out.integer(index);
        }
        for (field, text) in texts {
            if let Some(text) = text {
                out.bulk(field.as_bytes());
                out.bulk(text.as_bytes());
            }
        }
        if !arg.flags.is_empty() {
            out.bulk(b"flags");
            out.set(arg.flags.len());
            for flag in arg.flags {
                out.simple(flag);
            }
        }
        if nested {
            out.bulk(b"arguments");
            argument_docs(out, arg.arguments);
        }
    }
}
