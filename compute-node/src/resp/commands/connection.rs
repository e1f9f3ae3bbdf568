//! The connection commands: AUTH, HELLO, SELECT, RESET and CLIENT.

use bytes::Bytes;

use super::{REDIS_VERSION, ReplyMode, RespClient, arity_error, parse_i64, shown, valid_name};
use crate::resp::reply::{Protocol, Replies};
use crate::resp::table::Kind;

impl RespClient<'_> {
    /// SELECT index: only database 0 exists.
    pub(super) fn select(&self, cmd: &[Bytes], out: &mut Replies) {
        match parse_i64(&cmd[1]) {
            Some(0) => out.simple("OK"),
            Some(_) => out.error("ERR DB index is out of range"),
            None => out.error("ERR value is not an integer or out of range"),
        }
    }

    /// RESET: the connection as it was when it was opened.
    pub(super) fn reset(&mut self, out: &mut Replies) {
        self.multi = None;
        self.watched.clear();
        self.reply_mode = ReplyMode::On;
        self.set_protocol(out, Protocol::Resp2);
        self.me.details.lock().name.clear();
        self.authenticated = self.shared.requirepass.is_none();
        out.simple("RESET");
    }

    /// The CLIENT subcommands.
    pub(super) fn client(&mut self, kind: Kind, cmd: &[Bytes], out: &mut Replies) {
        match kind {
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
            _ => unreachable!("dispatch sends only CLIENT subcommands here"),
        }
    }

    pub(super) fn set_protocol(&mut self, out: &mut Replies, protocol: Protocol) {
        out.protocol = protocol;
        self.me.details.lock().resp = protocol.number();
    }

    pub(super) fn auth(&mut self, cmd: &[Bytes], out: &mut Replies) {
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
    pub(super) fn password_fits(&self, user: &[u8], password: &[u8]) -> bool {
        user == b"default"
            && self
                .shared
                .requirepass
                .as_ref()
                .is_none_or(|p| p.as_bytes() == password)
    }

    /// HELLO [protover [AUTH username password] [SETNAME name]].
    pub(super) fn hello(&mut self, cmd: &[Bytes], out: &mut Replies) {
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

    pub(super) fn client_list(&self, cmd: &[Bytes], out: &mut Replies) {
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

    pub(super) fn client_setinfo(&self, cmd: &[Bytes], out: &mut Replies) {
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
    pub(super) fn client_kill(&self, cmd: &[Bytes], out: &mut Replies) {
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
