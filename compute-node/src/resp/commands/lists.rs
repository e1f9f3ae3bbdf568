//! The list commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN,
//! LRANGE, LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH and
//! LMPOP, answered as Redis 7 answers them. A command that changes lists
//! holds their keys' stripes from the read to the acknowledged write and
//! writes every list it changes in one unit.

use bytes::Bytes;

use super::collections::{parse_mpop, positive_count, store_write};
use super::expiry_args::NOT_AN_INTEGER;
use super::{RespClient, fail, parse_i64};
use crate::datatypes::List;
use crate::resp::reply::Replies;

/// Whether a pop found something to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Served {
    /// It answered what it popped.
    Yes,
    /// No key held anything: nothing is answered yet.
    Nothing,
    /// It answered an error.
    Failed,
}

/// The end of a list a command works at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// The head (LEFT, index 0).
    Left,
    /// The tail (RIGHT, index -1).
    Right,
}

impl End {
    /// LEFT or RIGHT, in any letter case.
    pub(super) fn parse(arg: &[u8]) -> Option<End> {
        if arg.eq_ignore_ascii_case(b"left") {
            Some(End::Left)
        } else if arg.eq_ignore_ascii_case(b"right") {
            Some(End::Right)
        } else {
            None
        }
    }
}

/// The positions (inclusive) that `start` and `end` name in a list of
/// `len` elements, as LRANGE and LTRIM read them; `None` for none.
fn range_of(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        len.saturating_add(start)
    } else {
        start
    }
    .max(0);
    let end = if end < 0 {
        len.saturating_add(end)
    } else {
        end
    };
    if start > end || start >= len {
        return None;
    }
    Some((start as usize, end.min(len - 1) as usize))
}

fn pop(list: &mut List, end: End) -> Option<Bytes> {
    match end {
        End::Left => list.elements.pop_front(),
        End::Right => list.elements.pop_back(),
    }
}

fn push(list: &mut List, end: End, element: Bytes) {
    match end {
        End::Left => list.elements.push_front(element),
        End::Right => list.elements.push_back(element),
    }
}

impl RespClient<'_> {
    /// Reads the list at `key`: `Err(())` once an error is answered.
    async fn read_list(&self, key: &[u8], out: &mut Replies) -> Result<Option<(List, u64)>, ()> {
        self.load::<List>(key).await.map_err(|e| fail(out, &e))
    }

    /// LPUSH, RPUSH (and with `only_existing`, LPUSHX, RPUSHX) key
    /// element...: the length after pushing.
    pub(super) async fn list_push(
        &mut self,
        cmd: &[Bytes],
        end: End,
        only_existing: bool,
        out: &mut Replies,
    ) {
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let Ok(found) = self.read_list(key, out).await else {
            return;
        };
        if only_existing && found.is_none() {
            return out.integer(0);
        }
        let (mut list, expire_at_ms) = found.unwrap_or_default();
        for element in &cmd[2..] {
            push(&mut list, end, element.clone());
        }
        match self.store(key, &list, expire_at_ms).await {
            Ok(()) => out.integer(list.len() as i64),
            Err(e) => fail(out, &e),
        }
    }

    /// LPOP, RPOP key [count].
    pub(super) async fn list_pop(&mut self, cmd: &[Bytes], end: End, out: &mut Replies) {
        if cmd.len() > 3 {
            let name = if end == End::Left { "lpop" } else { "rpop" };
            return out.error(&super::arity_error(name));
        }
        let count = match cmd.get(2).map(|c| positive_count(c)) {
            None => None,
            Some(Ok(n)) => Some(n),
            Some(Err(text)) => return out.error(text),
        };
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let Ok(found) = self.read_list(key, out).await else {
            return;
        };
        let Some((mut list, expire_at_ms)) = found else {
            return match count {
                None => out.null(),
                Some(_) => out.null_array(),
            };
        };
        if count == Some(0) {
            return out.array(0);
        }
        let n = count.unwrap_or(1).min(list.len() as u64) as usize;
        let popped: Vec<Bytes> = (0..n).filter_map(|_| pop(&mut list, end)).collect();
        if let Err(e) = self.store(key, &list, expire_at_ms).await {
            return fail(out, &e);
        }
        match count {
            None => out.bulk_or_null(popped.first().map(|e| &e[..])),
            Some(_) => {
                out.array(popped.len());
                for element in &popped {
                    out.bulk(element);
                }
            }
        }
    }

    /// LLEN key.
    pub(super) async fn llen(&self, cmd: &[Bytes], out: &mut Replies) {
        if let Ok(found) = self.read_list(&cmd[1], out).await {
            out.integer(found.map_or(0, |(l, _)| l.len()) as i64);
        }
    }

    /// LRANGE key start stop.
    pub(super) async fn lrange(&self, cmd: &[Bytes], out: &mut Replies) {
        let (Some(start), Some(end)) = (parse_i64(&cmd[2]), parse_i64(&cmd[3])) else {
            return out.error(NOT_AN_INTEGER);
        };
        let Ok(found) = self.read_list(&cmd[1], out).await else {
            return;
        };
        let list = found.map(|(l, _)| l).unwrap_or_default();
        match range_of(list.len(), start, end) {
            None => out.array(0),
            Some((first, last)) => {
                out.array(last - first + 1);
                for element in list.elements.range(first..=last) {
                    out.bulk(element);
                }
            }
        }
    }

    /// LINDEX key index.
    pub(super) async fn lindex(&self, cmd: &[Bytes], out: &mut Replies) {
        let Ok(found) = self.read_list(&cmd[1], out).await else {
            return;
        };
        let Some((list, _)) = found else {
            return out.null();
        };
        let Some(index) = parse_i64(&cmd[2]) else {
            return out.error(NOT_AN_INTEGER);
        };
        let element = list.position(index).map(|at| &list.elements[at][..]);
        out.bulk_or_null(element);
    }

    /// LSET key index element.
    pub(super) async fn lset(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let Ok(found) = self.read_list(key, out).await else {
            return;
        };
        let Some((mut list, expire_at_ms)) = found else {
            return out.error("ERR no such key");
        };
        let Some(index) = parse_i64(&cmd[2]) else {
            return out.error(NOT_AN_INTEGER);
        };
        let Some(at) = list.position(index) else {
            return out.error("ERR index out of range");
        };
        list.elements[at] = cmd[3].clone();
        match self.store(key, &list, expire_at_ms).await {
            Ok(()) => out.simple("OK"),
            Err(e) => fail(out, &e),
        }
    }

    /// LINSERT key BEFORE|AFTER pivot element: the length after, -1 if
    /// the pivot is not there, 0 if the key is not.
    pub(super) async fn linsert(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let after = if cmd[2].eq_ignore_ascii_case(b"after") {
            true
        } else if cmd[2].eq_ignore_ascii_case(b"before") {
            false
        } else {
            return out.error("ERR syntax error");
        };
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let Ok(found) = self.read_list(key, out).await else {
            return;
        };
        let Some((mut list, expire_at_ms)) = found else {
            return out.integer(0);
        };
        let Some(at) = list.elements.iter().position(|e| e == &cmd[3]) else {
            return out.integer(-1);
        };
        list.elements
            .insert(at + usize::from(after), cmd[4].clone());
        match self.store(key, &list, expire_at_ms).await {
            Ok(()) => out.integer(list.len() as i64),
            Err(e) => fail(out, &e),
        }
    }

    /// LREM key count element: how many were removed (from the head for a
    /// positive count, from the tail for a negative one, all for 0).
    pub(super) async fn lrem(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let Some(count) = parse_i64(&cmd[2]) else {
            return out.error(NOT_AN_INTEGER);
        };
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let Ok(found) = self.read_list(key, out).await else {
            return;
        };
        let Some((mut list, expire_at_ms)) = found else {
            return out.integer(0);
        };
        let most = if count == 0 {
            usize::MAX
        } else {
            usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
        };
        let mut removed = 0;
        if count < 0 {
            let mut at = list.len();
            while at > 0 && removed < most {
                at -= 1;
                if list.elements[at] == cmd[3] {
                    list.elements.remove(at);
                    removed += 1;
                }
            }
        } else {
            let mut at = 0;
            while at < list.len() && removed < most {
                if list.elements[at] == cmd[3] {
                    list.elements.remove(at);
                    removed += 1;
                } else {
                    at += 1;
                }
            }
        }
        if removed == 0 {
            return out.integer(0);
        }
        match self.store(key, &list, expire_at_ms).await {
            Ok(()) => out.integer(removed as i64),
            Err(e) => fail(out, &e),
        }
    }

    /// LTRIM key start stop: keeps only that range.
    pub(super) async fn ltrim(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let (Some(start), Some(end)) = (parse_i64(&cmd[2]), parse_i64(&cmd[3])) else {
            return out.error(NOT_AN_INTEGER);
        };
        let key = &cmd[1];
        let _stripes = self.lock_keys(std::slice::from_ref(key)).await;
        let Ok(found) = self.read_list(key, out).await else {
            return;
        };
        let Some((mut list, expire_at_ms)) = found else {
            return out.simple("OK");
        };
        let before = list.len();
        match range_of(list.len(), start, end) {
            None => list.elements.clear(),
            Some((first, last)) => {
                list.elements.truncate(last + 1);
                list.elements.drain(..first);
            }
        }
        if list.len() != before
            && let Err(e) = self.store(key, &list, expire_at_ms).await
        {
            return fail(out, &e);
        }
        out.simple("OK");
    }

    /// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
    pub(super) async fn lpos(&self, cmd: &[Bytes], out: &mut Replies) {
        let (mut rank, mut count, mut maxlen) = (1i64, None::<u64>, 0u64);
        let mut j = 3;
        while j < cmd.len() {
            let value = cmd.get(j + 1);
            match value {
                Some(value) if cmd[j].eq_ignore_ascii_case(b"rank") => match parse_i64(value) {
                    None => return out.error(NOT_AN_INTEGER),
                    Some(i64::MIN) => {
                        return out.error(
                            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                        );
                    }
                    Some(0) => {
                        return out.error(
                            "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                        );
                    }
                    Some(n) => rank = n,
                },
                Some(value) if cmd[j].eq_ignore_ascii_case(b"count") => match parse_i64(value) {
                    Some(n) if n >= 0 => count = Some(n as u64),
                    _ => return out.error("ERR COUNT can't be negative"),
                },
                Some(value) if cmd[j].eq_ignore_ascii_case(b"maxlen") => match parse_i64(value) {
                    Some(n) if n >= 0 => maxlen = n as u64,
                    _ => return out.error("ERR MAXLEN can't be negative"),
                },
                _ => return out.error("ERR syntax error"),
            }
            j += 2;
        }
        let Ok(found) = self.read_list(&cmd[1], out).await else {
            return;
        };
        let Some((list, _)) = found else {
            return match count {
                Some(_) => out.array(0),
                None => out.null(),
            };
        };
        let len = list.len();
        let from_tail = rank < 0;
        let skip = rank.unsigned_abs() - 1;
        let mut found_at = Vec::new();
        let mut matches = 0u64;
        for scanned in 0..len {
            if maxlen != 0 && scanned as u64 >= maxlen {
                break;
            }
            let at = if from_tail {
                len - 1 - scanned
            } else {
                scanned
            };
            if list.elements[at] != cmd[2] {
                continue;
            }
            matches += 1;
            if matches > skip {
                found_at.push(at);
                let wanted = count.unwrap_or(1);
                if wanted != 0 && found_at.len() as u64 >= wanted {
                    break;
                }
            }
        }
        match count {
            Some(_) => {
                out.array(found_at.len());
                for at in found_at {
                    out.integer(at as i64);
                }
            }
            None => match found_at.first() {
                Some(&at) => out.integer(at as i64),
                None => out.null(),
            },
        }
    }

    /// LMOVE source destination LEFT|RIGHT LEFT|RIGHT (and RPOPLPUSH,
    /// `ends` given): the element moved, or null.
    pub(super) async fn lmove(
        &mut self,
        cmd: &[Bytes],
        ends: Option<(End, End)>,
        out: &mut Replies,
    ) {
        let (from_end, to_end) = match ends {
            Some(ends) => ends,
            None => match (End::parse(&cmd[3]), End::parse(&cmd[4])) {
                (Some(from), Some(to)) => (from, to),
                _ => return out.error("ERR syntax error"),
            },
        };
        if self
            .move_element(&cmd[1], &cmd[2], from_end, to_end, out)
            .await
            == Served::Nothing
        {
            out.null();
        }
    }

    /// Moves one element from `from`'s `from_end` to `to`'s `to_end` and
    /// answers it, or answers nothing if `from` has no list.
    pub(super) async fn move_element(
        &mut self,
        from: &Bytes,
        to: &Bytes,
        from_end: End,
        to_end: End,
        out: &mut Replies,
    ) -> Served {
        let _stripes = self.lock_keys(&[from.clone(), to.clone()]).await;
        let Ok(source) = self.read_list(from, out).await else {
            return Served::Failed;
        };
        let Some((mut source, source_expiry)) = source else {
            return Served::Nothing;
        };
        let Ok(destination) = self.read_list(to, out).await else {
            return Served::Failed;
        };
        let Some(element) = pop(&mut source, from_end) else {
            return Served::Nothing;
        };
        let writes = if from == to {
            push(&mut source, to_end, element.clone());
            vec![store_write(from, &source, source_expiry)]
        } else {
            let (mut destination, destination_expiry) = destination.unwrap_or_default();
            push(&mut destination, to_end, element.clone());
            vec![
                store_write(from, &source, source_expiry),
                store_write(to, &destination, destination_expiry),
            ]
        };
        match self.write(writes).await {
            Ok(()) => {
                out.bulk(&element);
                Served::Yes
            }
            Err(e) => {
                fail(out, &e);
                Served::Failed
            }
        }
    }

    /// LMPOP numkeys key... LEFT|RIGHT [COUNT count]: `[key, [elements]]`
    /// from the first non-empty list, or a null array.
    pub(super) async fn lmpop(&mut self, cmd: &[Bytes], out: &mut Replies) {
        let (keys, right, count) = match parse_mpop(cmd, 1, (b"left", b"right")) {
            Ok(parsed) => parsed,
            Err(text) => return out.error(text),
        };
        let end = if right { End::Right } else { End::Left };
        if self
            .pop_first_list(&keys, end, Some(count.unwrap_or(1)), out)
            .await
            == Served::Nothing
        {
            out.null_array();
        }
    }

    /// Pops from the first of `keys` that holds a list: `count` elements
    /// answered `[key, [elements]]` (LMPOP), or with `count` None one
    /// answered `[key, element]` (BLPOP); answers nothing if no key holds
    /// a list.
    pub(super) async fn pop_first_list(
        &mut self,
        keys: &[Bytes],
        end: End,
        count: Option<u64>,
        out: &mut Replies,
    ) -> Served {
        let _stripes = self.lock_keys(keys).await;
        for key in keys {
            let Ok(found) = self.read_list(key, out).await else {
                return Served::Failed;
            };
            let Some((mut list, expire_at_ms)) = found else {
                continue;
            };
            let n = count.unwrap_or(1).min(list.len() as u64) as usize;
            let popped: Vec<Bytes> = (0..n).filter_map(|_| pop(&mut list, end)).collect();
            if let Err(e) = self.store(key, &list, expire_at_ms).await {
                fail(out, &e);
                return Served::Failed;
            }
            out.array(2);
            out.bulk(key);
            if count.is_some() {
                out.array(popped.len());
            }
            for element in &popped {
                out.bulk(element);
            }
            return Served::Yes;
        }
        Served::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_read_as_redis_reads_them() {
        assert_eq!(range_of(5, 0, -1), Some((0, 4)));
        assert_eq!(range_of(5, -2, 100), Some((3, 4)));
        assert_eq!(range_of(5, 3, 1), None);
        assert_eq!(range_of(5, 5, 10), None);
        assert_eq!(range_of(5, -100, 0), Some((0, 0)));
        assert_eq!(range_of(0, 0, -1), None);
        assert_eq!(range_of(5, i64::MIN, i64::MAX), Some((0, 4)));
    }
}
