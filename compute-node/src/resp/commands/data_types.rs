//! Where the data-type commands (hashes, lists, sets, sorted sets) and
//! OBJECT go: one place that maps each command to its implementation in
//! `hashes`, `lists`, `sets`, `sorted_sets` and `blocking`.

use bytes::Bytes;

use super::lists::End;
use super::sets::SetOp;
use super::sorted_sets::{RangeKind, ZsetOp};
use super::{CommandError, RespClient, fail, unknown_command};
use crate::datatypes::{DataType, Hash, List, Set, SortedSet, string_slice};
use crate::resp::reply::Replies;
use crate::resp::table::Kind;

/// What OBJECT HELP answers: Redis 7.0's text for the subcommands
/// SplitKV has.
const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "HELP",
    "    Prints this help.",
];

/// What OBJECT ENCODING answers for a string: `int`, `embstr` or `raw`,
/// as Redis encodes a value set by SET.
fn string_encoding(value: &[u8]) -> &'static str {
    if value.len() <= 20 && crate::datatypes::parse_integer(value).is_some() {
        "int"
    } else if value.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

impl RespClient<'_> {
    /// Carries out a data-type command or OBJECT.
    pub(super) async fn data_type_command(&mut self, kind: Kind, cmd: &[Bytes], out: &mut Replies) {
        match kind {
            Kind::Hset => self.hset(cmd, false, out).await,
            Kind::Hmset => self.hset(cmd, true, out).await,
            Kind::Hsetnx => self.hsetnx(cmd, out).await,
            Kind::Hget => self.hget(cmd, out).await,
            Kind::Hmget => self.hmget(cmd, out).await,
            Kind::Hgetall => self.hgetall(cmd, out).await,
            Kind::Hdel => self.remove_named::<Hash>(cmd, out).await,
            Kind::Hlen => self.hlen(cmd, out).await,
            Kind::Hexists => self.hexists(cmd, out).await,
            Kind::Hkeys => self.hkeys(cmd, false, out).await,
            Kind::Hvals => self.hkeys(cmd, true, out).await,
            Kind::Hstrlen => self.hstrlen(cmd, out).await,
            Kind::Hincrby => self.hincrby(cmd, out).await,
            Kind::Hincrbyfloat => self.hincrbyfloat(cmd, out).await,
            Kind::Hrandfield => self.hrandfield(cmd, out).await,
            Kind::Hscan => self.hscan(cmd, out).await,
            Kind::Lpush => self.list_push(cmd, End::Left, false, out).await,
            Kind::Rpush => self.list_push(cmd, End::Right, false, out).await,
            Kind::Lpushx => self.list_push(cmd, End::Left, true, out).await,
            Kind::Rpushx => self.list_push(cmd, End::Right, true, out).await,
            Kind::Lpop => self.list_pop(cmd, End::Left, out).await,
            Kind::Rpop => self.list_pop(cmd, End::Right, out).await,
            Kind::Llen => self.llen(cmd, out).await,
            Kind::Lrange => self.lrange(cmd, out).await,
            Kind::Lindex => self.lindex(cmd, out).await,
            Kind::Lset => self.lset(cmd, out).await,
            Kind::Linsert => self.linsert(cmd, out).await,
            Kind::Lrem => self.lrem(cmd, out).await,
            Kind::Ltrim => self.ltrim(cmd, out).await,
            Kind::Lpos => self.lpos(cmd, out).await,
            Kind::Lmove => self.lmove(cmd, None, out).await,
            Kind::Rpoplpush => self.lmove(cmd, Some((End::Right, End::Left)), out).await,
            Kind::Lmpop => self.lmpop(cmd, out).await,
            Kind::Blpop => self.blpop(cmd, End::Left, out).await,
            Kind::Brpop => self.blpop(cmd, End::Right, out).await,
            Kind::Blmove => self.blmove(cmd, None, out).await,
            Kind::Brpoplpush => self.blmove(cmd, Some((End::Right, End::Left)), out).await,
            Kind::Blmpop => self.blmpop(cmd, out).await,
            Kind::Sadd => self.sadd(cmd, out).await,
            Kind::Srem => self.remove_named::<Set>(cmd, out).await,
            Kind::Smembers => self.smembers(cmd, out).await,
            Kind::Sismember => self.sismember(cmd, out).await,
            Kind::Smismember => self.smismember(cmd, out).await,
            Kind::Scard => self.scard(cmd, out).await,
            Kind::Spop => self.spop(cmd, out).await,
            Kind::Srandmember => self.srandmember(cmd, out).await,
            Kind::Smove => self.smove(cmd, out).await,
            Kind::Sinter => self.set_combine(cmd, SetOp::Inter, out).await,
            Kind::Sunion => self.set_combine(cmd, SetOp::Union, out).await,
            Kind::Sdiff => self.set_combine(cmd, SetOp::Diff, out).await,
            Kind::Sinterstore => self.set_combine_store(cmd, SetOp::Inter, out).await,
            Kind::Sunionstore => self.set_combine_store(cmd, SetOp::Union, out).await,
            Kind::Sdiffstore => self.set_combine_store(cmd, SetOp::Diff, out).await,
            Kind::Sintercard => self.sintercard(cmd, out).await,
            Kind::Sscan => self.sscan(cmd, out).await,
            Kind::Zadd => self.zadd(cmd, false, out).await,
            Kind::Zincrby => self.zadd(cmd, true, out).await,
            Kind::Zrem => self.remove_named::<SortedSet>(cmd, out).await,
            Kind::Zscore => self.zscore(cmd, out).await,
            Kind::Zmscore => self.zmscore(cmd, out).await,
            Kind::Zcard => self.zcard(cmd, out).await,
            Kind::Zcount => self.zcount(cmd, false, out).await,
            Kind::Zlexcount => self.zcount(cmd, true, out).await,
            Kind::Zrange => self.zrange(cmd, 1, None, false, out).await,
            Kind::Zrangestore => self.zrange(cmd, 2, None, true, out).await,
            Kind::Zrevrange => {
                self.zrange(cmd, 1, Some((RangeKind::Rank, true)), false, out)
                    .await
            }
            Kind::Zrangebyscore => {
                self.zrange(cmd, 1, Some((RangeKind::Score, false)), false, out)
                    .await
            }
            Kind::Zrevrangebyscore => {
                self.zrange(cmd, 1, Some((RangeKind::Score, true)), false, out)
                    .await
            }
            Kind::Zrangebylex => {
                self.zrange(cmd, 1, Some((RangeKind::Lex, false)), false, out)
                    .await
            }
            Kind::Zrevrangebylex => {
                self.zrange(cmd, 1, Some((RangeKind::Lex, true)), false, out)
                    .await
            }
            Kind::Zrank => self.zrank(cmd, false, out).await,
            Kind::Zrevrank => self.zrank(cmd, true, out).await,
            Kind::Zremrangebyrank => self.zremrange(cmd, RangeKind::Rank, out).await,
            Kind::Zremrangebyscore => self.zremrange(cmd, RangeKind::Score, out).await,
            Kind::Zremrangebylex => self.zremrange(cmd, RangeKind::Lex, out).await,
            Kind::Zpopmin => self.zpop(cmd, false, out).await,
            Kind::Zpopmax => self.zpop(cmd, true, out).await,
            Kind::Bzpopmin => self.bzpop(cmd, false, out).await,
            Kind::Bzpopmax => self.bzpop(cmd, true, out).await,
            Kind::Zmpop => self.zmpop(cmd, out).await,
            Kind::Bzmpop => self.bzmpop(cmd, out).await,
            Kind::Zunion => self.zcombine(cmd, ZsetOp::Union, false, false, out).await,
            Kind::Zinter => self.zcombine(cmd, ZsetOp::Inter, false, false, out).await,
            Kind::Zdiff => self.zcombine(cmd, ZsetOp::Diff, false, false, out).await,
            Kind::Zunionstore => self.zcombine(cmd, ZsetOp::Union, true, false, out).await,
            Kind::Zinterstore => self.zcombine(cmd, ZsetOp::Inter, true, false, out).await,
            Kind::Zdiffstore => self.zcombine(cmd, ZsetOp::Diff, true, false, out).await,
            Kind::Zintercard => self.zcombine(cmd, ZsetOp::Inter, false, true, out).await,
            Kind::Zrandmember => self.zrandmember(cmd, out).await,
            Kind::Zscan => self.zscan(cmd, out).await,
            Kind::ObjectEncoding => self.object_encoding(cmd, out).await,
            Kind::ObjectHelp => {
                out.array(OBJECT_HELP.len());
                for line in OBJECT_HELP {
                    out.simple(line);
                }
            }
            _ => out.error(&unknown_command(cmd)),
        }
    }

    /// OBJECT ENCODING key.
    async fn object_encoding(&self, cmd: &[Bytes], out: &mut Replies) {
        let stored = match self.stored_entry(&cmd[2]).await {
            Ok(Some((stored, _))) => stored,
            Ok(None) => return out.null(),
            Err(e) => return fail(out, &e),
        };
        let name = match DataType::of(&stored) {
            DataType::String => Ok(string_encoding(string_slice(&stored).unwrap_or_default())),
            DataType::Hash => Hash::decode(stored).map(|h| h.encoding_name()),
            DataType::List => List::decode(stored).map(|l| l.encoding_name()),
            DataType::Set => Set::decode(stored).map(|s| s.encoding_name()),
            DataType::SortedSet => SortedSet::decode(stored).map(|s| s.encoding_name()),
        };
        match name {
            Ok(name) => out.bulk(name.as_bytes()),
            Err(e) => fail(out, &CommandError::from(e)),
        }
    }
}
