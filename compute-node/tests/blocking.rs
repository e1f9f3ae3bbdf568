//! The blocking pops against a compute node, with real clients: clients
//! blocked on one key are served in the order they blocked, a push inside
//! MULTI wakes them only once EXEC has run, timeouts answer null, BLMOVE
//! and BZPOPMIN wake on the writes that feed them, and a blocked client
//! that disconnects leaves nothing behind (no element is popped for it).
//! Every step waits for an event (INFO's `blocked_clients`), never for a
//! fixed time.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses its compute node"
)]
mod diff;
#[allow(dead_code, reason = "shared test support")]
mod support;

use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn connect(addr: SocketAddr) -> redis::Connection {
    redis::Client::open(format!("redis://{addr}/"))
        .expect("client")
        .get_connection()
        .expect("connect")
}

/// INFO's `blocked_clients`.
fn blocked_clients(con: &mut redis::Connection) -> usize {
    let info: String = redis::cmd("INFO").arg("clients").query(con).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO reports blocked_clients")
}

/// Waits until `n` clients are blocked (a minute at most, then fails).
fn wait_blocked(con: &mut redis::Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while blocked_clients(con) != n {
        assert!(Instant::now() < deadline, "never saw {n} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn clients_blocked_on_one_list_are_served_in_the_order_they_blocked() {
    let node = diff::ComputeNode::start(None);
    let mut control = connect(node.addr);
    let mut waiting = Vec::new();
    for i in 0..3 {
        let addr = node.addr;
        waiting.push(std::thread::spawn(move || {
            let mut con = connect(addr);
            let got: (String, String) = redis::cmd("BLPOP")
                .arg("queue")
                .arg("other")
                .arg(0)
                .query(&mut con)
                .expect("BLPOP");
            got
        }));
        wait_blocked(&mut control, i + 1);
    }
    let len: i64 = redis::cmd("RPUSH")
        .arg("queue")
        .arg(&["first", "second", "third"][..])
        .query(&mut control)
        .expect("RPUSH");
    assert_eq!(len, 3);
    let served: Vec<(String, String)> = waiting
        .into_iter()
        .map(|t| t.join().expect("client"))
        .collect();
    assert_eq!(
        served,
        vec![
            ("queue".to_string(), "first".to_string()),
            ("queue".to_string(), "second".to_string()),
            ("queue".to_string(), "third".to_string()),
        ]
    );
    let left: i64 = redis::cmd("EXISTS")
        .arg("queue")
        .query(&mut control)
        .expect("EXISTS");
    assert_eq!(left, 0, "every element went to a blocked client");
    assert_eq!(blocked_clients(&mut control), 0);
}

#[test]
fn a_push_inside_multi_wakes_the_blocked_client_after_exec() {
    let node = diff::ComputeNode::start(None);
    let mut control = connect(node.addr);
    let addr = node.addr;
    let waiter = std::thread::spawn(move || {
        let mut con = connect(addr);
        let got: (String, String) = redis::cmd("BRPOP")
            .arg("jobs")
            .arg(0)
            .query(&mut con)
            .expect("BRPOP");
        got
    });
    wait_blocked(&mut control, 1);
    let mut pusher = connect(node.addr);
    let () = redis::cmd("MULTI").query(&mut pusher).expect("MULTI");
    let queued: String = redis::cmd("LPUSH")
        .arg("jobs")
        .arg("job-1")
        .query(&mut pusher)
        .expect("LPUSH queued");
    assert_eq!(queued, "QUEUED");
    assert_eq!(
        blocked_clients(&mut control),
        1,
        "a queued push wakes no one"
    );
    let replies: Vec<i64> = redis::cmd("EXEC").query(&mut pusher).expect("EXEC");
    assert_eq!(replies, vec![1]);
    let got = waiter.join().expect("client");
    assert_eq!(got, ("jobs".to_string(), "job-1".to_string()));
}

#[test]
fn timeouts_answer_null_and_blocking_inside_multi_does_not_block() {
    let node = diff::ComputeNode::start(None);
    let mut con = connect(node.addr);
    let popped: Option<(String, String)> = redis::cmd("BLPOP")
        .arg("empty")
        .arg("0.05")
        .query(&mut con)
        .expect("BLPOP");
    assert_eq!(popped, None);
    let moved: Option<String> = redis::cmd("BLMOVE")
        .arg("empty")
        .arg("dst")
        .arg("LEFT")
        .arg("RIGHT")
        .arg("0.05")
        .query(&mut con)
        .expect("BLMOVE");
    assert_eq!(moved, None);
    let () = redis::cmd("MULTI").query(&mut con).expect("MULTI");
    let _: String = redis::cmd("BZPOPMIN")
        .arg("empty")
        .arg(0)
        .query(&mut con)
        .expect("queued");
    let replies: Vec<Option<Vec<String>>> = redis::cmd("EXEC").query(&mut con).expect("EXEC");
    assert_eq!(
        replies,
        vec![None],
        "inside EXEC a blocking pop answers at once"
    );
    let err = redis::cmd("BLPOP")
        .arg("empty")
        .arg("-1")
        .query::<Option<Vec<String>>>(&mut con)
        .expect_err("a negative timeout");
    assert!(err.to_string().contains("timeout is negative"), "{err}");
}

#[test]
fn blmove_and_bzpopmin_wake_on_the_writes_that_feed_them() {
    let node = diff::ComputeNode::start(None);
    let mut control = connect(node.addr);
    let addr = node.addr;
    let mover = std::thread::spawn(move || {
        let mut con = connect(addr);
        let moved: String = redis::cmd("BLMOVE")
            .arg("src")
            .arg("dst")
            .arg("RIGHT")
            .arg("LEFT")
            .arg(0)
            .query(&mut con)
            .expect("BLMOVE");
        moved
    });
    wait_blocked(&mut control, 1);
    let popper = std::thread::spawn(move || {
        let mut con = connect(addr);
        let popped: (String, String, f64) = redis::cmd("BZPOPMIN")
            .arg("scores")
            .arg(0)
            .query(&mut con)
            .expect("BZPOPMIN");
        popped
    });
    wait_blocked(&mut control, 2);
    let _: i64 = redis::cmd("RPUSH")
        .arg("src")
        .arg("a")
        .arg("b")
        .query(&mut control)
        .expect("RPUSH");
    let _: i64 = redis::cmd("ZADD")
        .arg("scores")
        .arg(5)
        .arg("five")
        .arg(2)
        .arg("two")
        .query(&mut control)
        .expect("ZADD");
    assert_eq!(mover.join().expect("mover"), "b");
    assert_eq!(
        popper.join().expect("popper"),
        ("scores".to_string(), "two".to_string(), 2.0)
    );
    let dst: Vec<String> = redis::cmd("LRANGE")
        .arg("dst")
        .arg(0)
        .arg(-1)
        .query(&mut control)
        .expect("LRANGE");
    assert_eq!(dst, vec!["b"]);
    let src: Vec<String> = redis::cmd("LRANGE")
        .arg("src")
        .arg(0)
        .arg(-1)
        .query(&mut control)
        .expect("LRANGE");
    assert_eq!(src, vec!["a"]);
}

#[test]
fn a_blocked_client_that_disconnects_leaves_nothing_behind() {
    let node = diff::ComputeNode::start(None);
    let mut control = connect(node.addr);
    {
        let mut raw = std::net::TcpStream::connect(node.addr).expect("connect");
        raw.write_all(b"*3\r\n$5\r\nBLPOP\r\n$4\r\ngone\r\n$1\r\n0\r\n")
            .expect("send BLPOP");
        wait_blocked(&mut control, 1);
    }
    // The client went away: the server notices and unblocks it.
    wait_blocked(&mut control, 0);
    let _: i64 = redis::cmd("RPUSH")
        .arg("gone")
        .arg("kept")
        .query(&mut control)
        .expect("RPUSH");
    let left: Vec<String> = redis::cmd("LRANGE")
        .arg("gone")
        .arg(0)
        .arg(-1)
        .query(&mut control)
        .expect("LRANGE");
    assert_eq!(
        left,
        vec!["kept"],
        "no element was popped for the departed client"
    );
}
