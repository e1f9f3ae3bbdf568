//! A differential harness: a real `redis-server` and a real compute node
//! (in front of a real storage node) get the same command streams as raw
//! RESP bytes over TCP, and their replies are compared byte for byte, or
//! by shape where a reply must differ (the test names why).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use compute_node::Engine;

use crate::support::{StorageNode, serve_resp};

/// The subcommands SplitKV has that the reference `redis-server` (Redis
/// 7.0) has too, as `COMMAND INFO` and `COMMAND DOCS` name them.
pub const SUBCOMMANDS_THE_REFERENCE_HAS: &[&str] = &[
    "client|id",
    "client|setname",
    "client|getname",
    "client|info",
    "client|list",
    "client|kill",
    "client|no-evict",
    "client|reply",
    "config|get",
    "config|set",
    "config|resetstat",
    "command|count",
    "command|info",
    "command|docs",
    "command|list",
    "object|encoding",
    "object|help",
];

/// How long a reply may take before the test fails.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// A `redis-server` child process on a loopback port, killed on drop.
pub struct RedisServer {
    pub addr: SocketAddr,
    child: Child,
    /// Its working directory, where a replica keeps the copy it syncs: no
    /// file of one server is loaded by another.
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts `redis-server` with no persistence, one database, and the
    /// given password (if any); returns once it accepts connections.
    pub fn start(requirepass: Option<&str>) -> Self {
        Self::start_with_args(requirepass, &[])
    }

    /// [`RedisServer::start`] with more settings (`--name value` pairs).
    pub fn start_with_args(requirepass: Option<&str>, args: &[&str]) -> Self {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
            probe.local_addr().expect("address").port()
        };
        let dir = tempfile::tempdir().expect("redis-server's directory");
        let mut command = Command::new("redis-server");
        command.current_dir(dir.path());
        command.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--databases",
            "1",
            "--protected-mode",
            "no",
            "--loglevel",
            "notice",
        ]);
        if let Some(password) = requirepass {
            command.args(["--requirepass", password]);
        }
        command.args(args);
        let mut child = match command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
        {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "redis-server is not installed; the differential tests need it: \
                 apt-get install redis-server"
            ),
            Err(e) => panic!("starting redis-server failed: {e}"),
        };
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("Ready to accept connections") => break,
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("reading redis-server's log: {e}"),
                None => panic!("redis-server exited before accepting connections"),
            }
        }
        // Keep draining its log so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
            _dir: dir,
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A compute node serving RESP on a loopback port, with its storage node.
pub struct ComputeNode {
    pub addr: SocketAddr,
    /// The engine behind the server.
    pub _engine: Arc<Engine>,
    _stop: tokio::sync::oneshot::Sender<()>,
    _storage: StorageNode,
}

impl ComputeNode {
    /// Starts a storage node and a compute node in front of it.
    pub fn start(requirepass: Option<&str>) -> Self {
        let storage = StorageNode::start(4);
        let engine = Arc::new(storage.connect());
        let (addr, stop) = serve_resp(&engine, &storage, requirepass);
        Self {
            addr,
            _engine: engine,
            _stop: stop,
            _storage: storage,
        }
    }
}

/// A reply, parsed (RESP2 and RESP3 types).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
    Null,
    Double(Vec<u8>),
    Boolean(bool),
    BigNumber(Vec<u8>),
    Verbatim(Vec<u8>),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
    Push(Vec<Reply>),
}

/// Parses one reply from the start of `buf`: the reply and the bytes it
/// took, or `None` if it is not complete yet. Panics on bytes that are not
/// RESP (the servers under test must never send those).
pub fn parse_reply(buf: &[u8]) -> Option<(Reply, usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = &buf[1..end];
    let after = end + 2;
    let number = |line: &[u8]| -> i64 {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not a number: {:?}", String::from_utf8_lossy(line)))
    };
    let items = |count: usize, mut at: usize| -> Option<(Vec<Reply>, usize)> {
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let (item, used) = parse_reply(&buf[at..])?;
            out.push(item);
            at += used;
        }
        Some((out, at))
    };
    let blob = |len: i64| -> Option<(Vec<u8>, usize)> {
        let len = len as usize;
        if buf.len() < after + len + 2 {
            return None;
        }
        assert_eq!(&buf[after + len..after + len + 2], b"\r\n", "blob end");
        Some((buf[after..after + len].to_vec(), after + len + 2))
    };
    Some(match buf[0] {
        b'+' => (Reply::Simple(line.to_vec()), after),
        b'-' => (Reply::Error(line.to_vec()), after),
        b':' => (Reply::Integer(number(line)), after),
        b'_' => (Reply::Null, after),
        b',' => (Reply::Double(line.to_vec()), after),
        b'(' => (Reply::BigNumber(line.to_vec()), after),
        b'#' => (Reply::Boolean(line == b"t"), after),
        b'$' => match number(line) {
            -1 => (Reply::Bulk(None), after),
            len => {
                let (bytes, used) = blob(len)?;
                (Reply::Bulk(Some(bytes)), used)
            }
        },
        b'=' => {
            let (bytes, used) = blob(number(line))?;
            (Reply::Verbatim(bytes), used)
        }
        b'*' => match number(line) {
            -1 => (Reply::Array(None), after),
            n => {
                let (list, used) = items(n as usize, after)?;
                (Reply::Array(Some(list)), used)
            }
        },
        b'~' => {
            let (list, used) = items(number(line) as usize, after)?;
            (Reply::Set(list), used)
        }
        b'>' => {
            let (list, used) = items(number(line) as usize, after)?;
            (Reply::Push(list), used)
        }
        b'%' => {
            let (list, used) = items(2 * number(line) as usize, after)?;
            let mut pairs = Vec::new();
            let mut list = list.into_iter();
            while let (Some(k), Some(v)) = (list.next(), list.next()) {
                pairs.push((k, v));
            }
            (Reply::Map(pairs), used)
        }
        other => panic!(
            "not a RESP reply (type byte {other:?}): {:?}",
            String::from_utf8_lossy(&buf[..buf.len().min(200)])
        ),
    })
}

/// A reply's shape: its types and sizes, and the text of simple strings,
/// map keys and error codes, without contents that may rightly differ.
pub fn shape(reply: &Reply) -> String {
    match reply {
        Reply::Simple(s) => format!("+{}", String::from_utf8_lossy(s)),
        Reply::Error(e) => {
            let code = e.split(|&b| b == b' ').next().unwrap_or_default();
            format!("-{}", String::from_utf8_lossy(code))
        }
        Reply::Integer(_) => ":".into(),
        Reply::Bulk(None) => "$-1".into(),
        Reply::Bulk(Some(_)) => "$".into(),
        Reply::Array(None) => "*-1".into(),
        Reply::Array(Some(items)) => {
            let inner: Vec<String> = items.iter().map(shape).collect();
            format!("*[{}]", inner.join(","))
        }
        Reply::Null => "_".into(),
        Reply::Double(_) => ",".into(),
        Reply::Boolean(_) => "#".into(),
        Reply::BigNumber(_) => "(".into(),
        Reply::Verbatim(_) => "=".into(),
        Reply::Map(pairs) => {
            let inner: Vec<String> = pairs
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        Reply::Bulk(Some(k)) | Reply::Simple(k) => {
                            String::from_utf8_lossy(k).into_owned()
                        }
                        other => shape(other),
                    };
                    format!("{key}={}", shape(v))
                })
                .collect();
            format!("%[{}]", inner.join(","))
        }
        Reply::Set(items) => {
            let inner: Vec<String> = items.iter().map(shape).collect();
            format!("~[{}]", inner.join(","))
        }
        Reply::Push(items) => {
            let inner: Vec<String> = items.iter().map(shape).collect();
            format!(">[{}]", inner.join(","))
        }
    }
}

/// Encodes a command as a RESP multibulk request.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One client connection, reading whole replies.
pub struct Connection {
    stream: TcpStream,
    input: Vec<u8>,
}

impl Connection {
    /// Connects to `addr`.
    pub fn open(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream,
            input: Vec::new(),
        }
    }

    /// Sends raw bytes.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// The next reply: its bytes and its parse.
    pub fn reply(&mut self) -> (Vec<u8>, Reply) {
        loop {
            if !self.input.is_empty()
                && let Some((reply, used)) = parse_reply(&self.input)
            {
                let raw = self.input.drain(..used).collect();
                return (raw, reply);
            }
            let mut chunk = [0u8; 64 << 10];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!(
                    "the connection closed before a whole reply (have {:?})",
                    String::from_utf8_lossy(&self.input)
                ),
                Ok(n) => self.input.extend_from_slice(&chunk[..n]),
                // A signal (a child process's end) interrupted the read.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => panic!(
                    "no reply within {REPLY_TIMEOUT:?}: {e} (have {:?})",
                    String::from_utf8_lossy(&self.input)
                ),
            }
        }
    }

    /// True if the server closes the connection with nothing more sent.
    pub fn closed(&mut self) -> bool {
        let mut chunk = [0u8; 1024];
        self.input.is_empty() && matches!(self.stream.read(&mut chunk), Ok(0))
    }
}

/// How a command's replies are compared.
#[derive(Debug, Clone, Copy)]
pub enum Compare {
    /// Byte for byte.
    Exact,
    /// By [`shape`]; the text says why the contents differ.
    Shape(&'static str),
    /// Neither server replies (e.g. after CLIENT REPLY OFF).
    NoReply,
    /// As the same collection of elements in any order (an array's, a
    /// set's or a map's), for replies in a hash table's order; the text
    /// says why.
    Unordered(&'static str),
}

/// One command of a stream and how its reply is compared.
#[derive(Debug, Clone)]
pub struct Step {
    pub args: Vec<Vec<u8>>,
    pub compare: Compare,
}

/// A step compared byte for byte.
pub fn exact(args: &[&[u8]]) -> Step {
    Step {
        args: args.iter().map(|a| a.to_vec()).collect(),
        compare: Compare::Exact,
    }
}

/// A step compared by shape, for the reason given.
pub fn by_shape(args: &[&[u8]], why: &'static str) -> Step {
    Step {
        args: args.iter().map(|a| a.to_vec()).collect(),
        compare: Compare::Shape(why),
    }
}

/// A step whose reply's elements are compared in any order, for the
/// reason given.
pub fn unordered(args: &[&[u8]], why: &'static str) -> Step {
    Step {
        args: args.iter().map(|a| a.to_vec()).collect(),
        compare: Compare::Unordered(why),
    }
}

/// `reply`'s top-level elements, each written out, sorted: equal for two
/// replies holding the same elements in any order (of the same kind).
pub fn sorted_elements(reply: &Reply) -> (String, Vec<String>) {
    let mut items: Vec<String> = match reply {
        Reply::Array(Some(items)) | Reply::Set(items) | Reply::Push(items) => {
            items.iter().map(|i| format!("{i:?}")).collect()
        }
        Reply::Map(pairs) => pairs.iter().map(|p| format!("{p:?}")).collect(),
        other => vec![format!("{other:?}")],
    };
    items.sort();
    (shape(reply).chars().take(1).collect(), items)
}

/// A step neither server answers.
pub fn silent(args: &[&[u8]]) -> Step {
    Step {
        args: args.iter().map(|a| a.to_vec()).collect(),
        compare: Compare::NoReply,
    }
}

/// Builds a step's arguments from string literals and byte strings.
#[macro_export]
macro_rules! cmd {
    ($($arg:expr),+ $(,)?) => {
        &[$(AsRef::<[u8]>::as_ref(&$arg)),+][..]
    };
}

/// A Redis server and a compute node, and one connection to each.
pub struct Pair {
    pub redis: RedisServer,
    pub splitkv: ComputeNode,
    pub to_redis: Connection,
    pub to_splitkv: Connection,
}

impl Pair {
    /// Starts both servers (no password) and connects to each.
    pub fn start() -> Self {
        Self::start_with_password(None)
    }

    /// Starts both servers with `requirepass` and connects to each.
    pub fn start_with_password(requirepass: Option<&str>) -> Self {
        let redis = RedisServer::start(requirepass);
        let splitkv = ComputeNode::start(requirepass);
        let to_redis = Connection::open(redis.addr);
        let to_splitkv = Connection::open(splitkv.addr);
        Self {
            redis,
            splitkv,
            to_redis,
            to_splitkv,
        }
    }

    /// A second connection to each server.
    pub fn connect(&self) -> (Connection, Connection) {
        (
            Connection::open(self.redis.addr),
            Connection::open(self.splitkv.addr),
        )
    }

    /// Sends `steps` one at a time on the main connections, comparing each
    /// reply before the next command goes.
    pub fn one_by_one(&mut self, steps: &[Step]) {
        for step in steps {
            let request = encode_step(step);
            self.to_redis.send(&request);
            self.to_splitkv.send(&request);
            compare_replies(step, &mut self.to_redis, &mut self.to_splitkv);
        }
    }

    /// Sends all of `steps` in one write to each server (pipelined), then
    /// compares the replies in order.
    pub fn pipelined(&mut self, steps: &[Step]) {
        let request: Vec<u8> = steps.iter().flat_map(encode_step).collect();
        self.to_redis.send(&request);
        self.to_splitkv.send(&request);
        for step in steps {
            compare_replies(step, &mut self.to_redis, &mut self.to_splitkv);
        }
    }

    /// Runs `steps` one by one, then again pipelined (the second run sees
    /// the state the first left, on both servers alike).
    pub fn both_ways(&mut self, steps: &[Step]) {
        self.one_by_one(steps);
        self.pipelined(steps);
    }
}

fn encode_step(step: &Step) -> Vec<u8> {
    let args: Vec<&[u8]> = step.args.iter().map(Vec::as_slice).collect();
    encode(&args)
}

/// A command's arguments as text, each cut at 40 bytes, for failure
/// messages.
pub fn describe(args: &[Vec<u8>]) -> String {
    let shown: Vec<String> = args
        .iter()
        .map(|a| {
            let text = String::from_utf8_lossy(&a[..a.len().min(40)]).into_owned();
            if a.len() > 40 {
                format!("{text}…({} bytes)", a.len())
            } else {
                text
            }
        })
        .collect();
    shown.join(" ")
}

/// Reads one reply from each connection for `step` and compares them.
pub fn compare_replies(step: &Step, redis: &mut Connection, splitkv: &mut Connection) {
    match step.compare {
        Compare::NoReply => {}
        Compare::Exact => {
            let (want, _) = redis.reply();
            let (got, _) = splitkv.reply();
            if want != got {
                let same = want.iter().zip(&got).take_while(|(a, b)| a == b).count();
                let from = same.saturating_sub(100);
                panic!(
                    "`{}`: the replies differ after {same} bytes: Redis answered …{:?}, SplitKV …{:?}",
                    describe(&step.args),
                    String::from_utf8_lossy(&want[from..want.len().min(same + 300)]),
                    String::from_utf8_lossy(&got[from..got.len().min(same + 300)]),
                );
            }
        }
        Compare::Unordered(why) => {
            let (_, want) = redis.reply();
            let (_, got) = splitkv.reply();
            assert_eq!(
                sorted_elements(&want),
                sorted_elements(&got),
                "`{}` (compared in any order: {why})",
                describe(&step.args),
            );
        }
        Compare::Shape(why) => {
            let (want_raw, want) = redis.reply();
            let (got_raw, got) = splitkv.reply();
            assert_eq!(
                shape(&want),
                shape(&got),
                "`{}` (compared by shape: {why}): Redis answered {:?}, SplitKV {:?}",
                describe(&step.args),
                String::from_utf8_lossy(&want_raw[..want_raw.len().min(2000)]),
                String::from_utf8_lossy(&got_raw[..got_raw.len().min(2000)]),
            );
        }
    }
}

/// HELLO `protocol`, compared by shape (each server has its own version
/// and id).
pub fn hello(protocol: &str) -> Step {
    by_shape(
        &[b"HELLO", protocol.as_bytes()],
        "HELLO's version and id are each server's own",
    )
}

/// The steps of `steps` compared byte for byte, queued 16 at a time inside
/// MULTI and compared again as EXEC's array (their arities must be valid,
/// or Redis would abort the transaction).
pub fn in_transactions(steps: Vec<Step>) -> Vec<Step> {
    let exact_steps: Vec<Step> = steps
        .into_iter()
        .filter(|s| matches!(s.compare, Compare::Exact))
        .collect();
    let mut out = Vec::new();
    for chunk in exact_steps.chunks(16) {
        out.push(exact(&[b"MULTI"]));
        out.extend(chunk.iter().cloned());
        out.push(exact(&[b"EXEC"]));
    }
    out
}

/// Runs `steps` one by one and pipelined on a fresh pair of servers, in
/// RESP2 and then again in RESP3.
pub fn in_both_protocols(steps: &[Step]) {
    let mut pair = Pair::start();
    pair.both_ways(steps);
    pair.one_by_one(&[hello("3")]);
    pair.both_ways(steps);
}
