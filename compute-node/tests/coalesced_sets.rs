//! Plain SETs of the RESP clients that share a partition travel to the
//! storage node together: runs that arrive while a batch is in flight
//! share the next one, each client's SETs still take effect in its order,
//! and no read returns an older value than one already acknowledged.

#[allow(
    dead_code,
    reason = "the differential harness; this test uses its RESP client"
)]
mod diff;
mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use compute_node::Engine;
use diff::{Connection, Reply, encode};
use support::{StorageNode, serve_resp};

/// The next reply's parse.
fn reply(conn: &mut Connection) -> Reply {
    conn.reply().1
}

fn ok() -> Reply {
    Reply::Simple(b"OK".to_vec())
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(Some(text.as_bytes().to_vec()))
}

/// `total_commands_processed` from INFO, asked on a connection of its own.
fn commands_processed(addr: SocketAddr) -> u64 {
    let mut conn = Connection::open(addr);
    conn.send(&encode(&[b"INFO", b"stats"]));
    let Reply::Bulk(Some(text)) = reply(&mut conn) else {
        panic!("INFO answers a bulk string");
    };
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|line| line.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_commands_processed in INFO")
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn runs_sent_while_a_batch_waits_share_the_next_batch_in_client_order() {
    let mut storage = StorageNode::start(4);
    // Sixteen clients over two partitions, eight to a partition.
    let mut config = storage.engine_config();
    config.client_partitions = 2;
    let engine = Arc::new(Engine::connect(config).expect("connect engine"));
    let (addr, _stop) = serve_resp(&engine, &storage, None);
    let clients: Vec<_> = (0..16).map(|_| Connection::open(addr)).collect();

    // With the storage node away, the first run of each partition holds
    // its lane in flight (waiting for the connection) and every later run
    // waits behind it.
    storage.stop();
    wait_until("the connections to go down", || {
        engine.stats().links_up == 0
    });
    let batches_before = engine.stats().put_batches;
    let processed_before = commands_processed(addr);
    let mut clients: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(t, mut conn)| {
            let key = format!("client{t}");
            let mut run = encode(&[b"SET", key.as_bytes(), b"first"]);
            run.extend(encode(&[b"SET", key.as_bytes(), b"second"]));
            run.extend(encode(&[b"SET", format!("{key}:other").as_bytes(), b"x"]));
            conn.send(&run);
            (conn, key)
        })
        .collect();
    // 48 SETs and the INFO that counted them.
    wait_until("the server to take every SET", || {
        commands_processed(addr) >= processed_before + 1 + 48
    });
    storage.resume();

    for (conn, key) in &mut clients {
        for n in 0..3 {
            assert_eq!(reply(conn), ok(), "{key}: SET {n}");
        }
    }
    let stats = engine.stats();
    assert_eq!(
        stats.put_batches - batches_before,
        4,
        "per partition, the first run alone, then the 7 that waited for it"
    );
    for (conn, key) in &mut clients {
        conn.send(&encode(&[b"GET", key.as_bytes()]));
        assert_eq!(reply(conn), bulk("second"), "{key}: its later SET wins");
    }
}

#[test]
fn concurrent_clients_never_read_an_older_value_than_one_acknowledged() {
    let storage = StorageNode::start(4);
    let engine: Arc<Engine> = Arc::new(storage.connect());
    let (addr, _stop) = serve_resp(&engine, &storage, None);
    let rounds: u64 = 300;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                let mut conn = Connection::open(addr);
                let mine = format!("counter{t}");
                let theirs = format!("counter{}", (t + 1) % 8);
                let mut last_seen_theirs = -1i64;
                for i in 0..rounds {
                    // Two SETs in one run, then reads in the next.
                    let mut run = encode(&[b"SET", mine.as_bytes(), b"-1"]);
                    run.extend(encode(&[b"SET", mine.as_bytes(), i.to_string().as_bytes()]));
                    conn.send(&run);
                    assert_eq!(reply(&mut conn), ok());
                    assert_eq!(reply(&mut conn), ok());
                    let mut reads = encode(&[b"GET", mine.as_bytes()]);
                    reads.extend(encode(&[b"GET", theirs.as_bytes()]));
                    conn.send(&reads);
                    assert_eq!(
                        reply(&mut conn),
                        bulk(&i.to_string()),
                        "{mine}: read my write"
                    );
                    if let Reply::Bulk(Some(seen)) = reply(&mut conn) {
                        let seen: i64 = String::from_utf8_lossy(&seen).parse().expect("a number");
                        // A run's first SET (-1) may show between runs;
                        // past it, a counter never goes back.
                        if seen >= 0 {
                            assert!(
                                seen >= last_seen_theirs,
                                "{theirs} went back from {last_seen_theirs} to {seen}"
                            );
                            last_seen_theirs = seen;
                        }
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("client thread");
    }
    assert_eq!(engine.stats().puts, 8 * rounds * 2);
}

#[test]
fn a_pipeline_of_values_larger_than_a_frame_together_is_split_and_every_set_lands_in_order() {
    // Values of up to 1 MiB: three of them in one pipeline would not fit a
    // single request, so they travel in requests of their own, in order.
    let storage = StorageNode::start_with_value_limit(4, 1 << 20);
    let mut config = storage.engine_config();
    config.client_partitions = 1;
    let engine = Arc::new(Engine::connect(config).expect("connect engine"));
    let (addr, _stop) = serve_resp(&engine, &storage, None);
    let values: Vec<Vec<u8>> = (0..3u8).map(|n| vec![b'a' + n; 1 << 20]).collect();
    let mut conn = Connection::open(addr);
    let batches_before = engine.stats().put_batches;
    let mut run = Vec::new();
    for value in &values {
        run.extend(encode(&[b"SET", b"big", value]));
    }
    run.extend(encode(&[b"SET", b"small", b"after the big ones"]));
    conn.send(&run);
    for n in 0..4 {
        assert_eq!(reply(&mut conn), ok(), "SET {n}");
    }
    assert!(
        engine.stats().put_batches - batches_before >= 3,
        "each large value in a request of its own"
    );
    let got = engine.get(b"big").expect("get").expect("a value");
    assert!(got == values[2][..], "the last SET of the pipeline wins");
    assert_eq!(
        engine.get(b"small").expect("get").as_deref(),
        Some(&b"after the big ones"[..])
    );
}

#[test]
fn with_a_small_value_limit_a_long_pipeline_travels_in_requests_that_fit() {
    // A frame here holds 66 KiB; 200 SETs of 1000 bytes are 200 KB.
    let storage = StorageNode::start_with_value_limit(4, 1024);
    let mut config = storage.engine_config();
    config.client_partitions = 1;
    let engine = Arc::new(Engine::connect(config).expect("connect engine"));
    let (addr, _stop) = serve_resp(&engine, &storage, None);
    let mut conn = Connection::open(addr);
    let value = |n: usize| format!("{n:0>1000}");
    let mut run = Vec::new();
    for n in 0..200 {
        let key = format!("k{}", n % 50);
        run.extend(encode(&[b"SET", key.as_bytes(), value(n).as_bytes()]));
    }
    conn.send(&run);
    for n in 0..200 {
        assert_eq!(reply(&mut conn), ok(), "SET {n}");
    }
    for k in 0..50 {
        let got = engine.get(format!("k{k}").as_bytes()).expect("get");
        assert_eq!(got.as_deref(), Some(value(150 + k).as_bytes()), "k{k}");
    }
}
