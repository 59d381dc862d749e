//! An operator's forced release of a lock (`forceRelease`) as a state machine: what it reads,
//! which writes it sends in which order, when it reads again and when it stops.
//!
//! The protocol:
//! - It starts from the lock item as the operator read it, and acts on that version only.
//!   An item that is gone is absent; one nobody holds (released, or a semaphore's head with no
//!   holder) is already free. A holder that is not the one first read (another token or
//!   owner, or for a FailClosed lock, which keeps its `guid` while held and has no token,
//!   another `guid`) is left alone: the lock changed hands.
//! - A FailClosed holder writes nothing while it holds, so nothing can tell it: its lock is
//!   freed only at once (`now`). A semaphore's holders share one item and are reclaimed by
//!   waiters, so there is nothing to force. A token that is no whole number cannot be named
//!   in a condition.
//! - A revocation (the default) leaves the holder's lease in place and gives the lock a new
//!   `guid`, so that a waiter waits out a whole lease from it. A lock held through a session is
//!   first named on the session's item (`Op::MarkRevoked`), and only then revoked out of the
//!   session with the session's lease: the session's next renewal reads the name back and the
//!   holder hears that this lock is lost before any waiter can take it. A session whose item
//!   is gone or ended renews nothing: its locks are free to any waiter already, and the lock
//!   is freed at once. A session that ends between the read and the mark stops the
//!   revocation.
//! - At once (`now`), a lock held through a session is named on the session's item first all
//!   the same (an ended session refuses it, which changes nothing); then a FailClosed item is
//!   deleted, any other released under a new `guid`.
//! - A write refused because the item moved on (a live holder rotates its `guid` at every
//!   heartbeat) reads the item again and starts over, up to `TRIES` reads in all. A write
//!   whose answer was lost and that finds its own `guid` (or its deletion) on the read that
//!   follows counts as done.

use std::time::Duration;

use crate::broken::{self, Broken};
use crate::item::RELEASED_LEASE_MS;
use crate::op::{Record, Reply};
use crate::request::{Answer, Ended, Env, Machine, Next, Pending, Policy, Purpose, Req, Step};

/// Reads of the lock item a forced release makes at most, the operator's first one included.
pub const TRIES: u32 = 5;

/// Attempts of each request through transient failures.
pub const ATTEMPTS: u32 = 3;

/// What a forced release did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Forced {
    /// There is no item.
    Absent,
    /// Nobody held the lock.
    AlreadyFree,
    /// Revoked: a waiter may take the lock this long after the revocation.
    Revoked { free_after_ms: u64 },
    /// Freed at once: deleted (a FailClosed item) or released. `ended_session`: the session it
    /// was held through had ended, so that no holder was left to tell.
    Freed { deleted: bool, ended_session: bool },
}

/// Why a forced release left the lock alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Another holder than the one first read holds it.
    Changed,
    /// The session it is held through ended while it was being revoked.
    SessionEnded,
    /// The item changed after each of `TRIES` reads.
    TriedOut,
    /// A FailClosed lock, without `now`.
    CannotBeTold,
    /// A semaphore's or read/write lock's head.
    Shared,
    /// The item's fencing token is no whole number.
    Unnamed,
}

/// How a forced release failed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Failure<E> {
    Refused(Refusal),
    /// A request failed (after its attempts).
    Failed(E),
}

pub type Out<E> = Result<Forced, Failure<E>>;

/// What a forced release asks its caller for next.
pub type ForceStep<R, E> = Step<<R as Record>::Guid, <R as Record>::Version, Out<E>>;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Doing {
    /// The lock item is read again.
    Reading,
    /// The session's item is read (a revocation).
    ReadingSession,
    /// The lock is named on its session's item; then `then` is written.
    Marking { then: Write },
    /// The lock's own item is written.
    Writing(Write),
    /// The variant `ForceRevokesFirst`: the session's item is marked after the revocation.
    MarkingLate(Forced),
}

/// The last write on the lock's item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Write {
    Free {
        ended_session: bool,
    },
    /// A revocation, with the lease a waiter then waits out; `session`: out of the session the
    /// lock is held through, whose item's lease that is.
    Revoke {
        lease: u64,
        session: bool,
    },
}

/// What the machine keeps of the lock item it read last: what it writes by and answers with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Read<G, V> {
    version: V,
    guid: Option<G>,
    session: Option<String>,
    lease: Option<u64>,
    fail_closed: bool,
}

/// A forced release under way.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Force<R: Record> {
    now: bool,
    new_guid: R::Guid,
    policy: Policy,
    /// The holder first read (`holder`).
    first: Option<Holder<R::Guid>>,
    /// The lock item as last read.
    read: Option<Read<R::Guid, R::Version>>,
    reads: u32,
    /// A write on the lock's item whose answer was lost (it may have landed).
    maybe: Option<Write>,
    doing: Doing,
    pending: Option<Pending<R::Guid, R::Version>>,
}

impl<R: Record + Clone> Force<R> {
    /// Starts the forced release of the item `read` (`None`: there is none), as the operator
    /// read it: `now` frees it at once; `new_guid` is the `guid` it writes; each request is
    /// given `timeout`.
    pub fn start<E>(
        now: bool,
        new_guid: R::Guid,
        timeout: Duration,
        read: Option<R>,
        env: &Env,
    ) -> (Self, ForceStep<R, E>) {
        let mut m = Force {
            now,
            new_guid,
            policy: Policy::new(ATTEMPTS, timeout),
            first: None,
            read: None,
            reads: 1,
            maybe: None,
            doing: Doing::Reading,
            pending: None,
        };
        let step = m.judge(read, env);
        (m, step)
    }

    fn send<E>(&mut self, doing: Doing, req: Req<R::Guid, R::Version>, env: &Env) -> ForceStep<R, E> {
        self.doing = doing;
        let (pending, step) = Pending::start(req, self.policy, env.now);
        self.pending = Some(pending);
        step
    }

    /// What to do about the lock item as just read.
    fn judge<E>(&mut self, read: Option<R>, env: &Env) -> ForceStep<R, E> {
        let landed = self.maybe.take();
        let Some(r) = read else {
            return Step::Done(Ok(match landed {
                Some(Write::Free { ended_session }) if self.deletes() => Forced::Freed {
                    deleted: true,
                    ended_session,
                },
                _ => Forced::Absent,
            }));
        };
        if let Some(w) = landed.filter(|_| r.carries(&self.new_guid)) {
            return Step::Done(Ok(self.forced(w)));
        }
        let held = match r.permits() {
            Some(_) => !r.holders().is_empty(),
            None => r.lease_duration_ms() != Some(RELEASED_LEASE_MS),
        };
        let refused = if !held {
            return Step::Done(Ok(Forced::AlreadyFree));
        } else if self.first.as_ref().is_some_and(|first| *first != holder(&r)) {
            Some(Refusal::Changed)
        } else if fail_closed(&r) && !self.now {
            Some(Refusal::CannotBeTold)
        } else if r.permits().is_some() {
            Some(Refusal::Shared)
        } else if !r.names_its_version() {
            Some(Refusal::Unnamed)
        } else {
            None
        };
        if let Some(why) = refused {
            return Step::Done(Err(Failure::Refused(why)));
        }
        self.first.get_or_insert_with(|| holder(&r));
        let read = Read {
            version: r.version(),
            guid: r.guid(),
            session: r.session().map(str::to_string),
            lease: r.lease_duration_ms(),
            fail_closed: fail_closed(&r),
        };
        let (session, guid) = (read.session.clone(), read.guid.clone());
        self.read = Some(read);
        match (self.now, session, guid) {
            (true, Some(session), Some(guid)) => {
                let then = Write::Free { ended_session: false };
                self.send(Doing::Marking { then }, Req::MarkRevoked { session, guid }, env)
            }
            (true, ..) => self.write(Write::Free { ended_session: false }, env),
            (false, Some(session), _) => self.send(Doing::ReadingSession, Req::ReadSession { session }, env),
            (false, None, _) => {
                let lease = self.read().lease.unwrap_or(0);
                self.write(Write::Revoke { lease, session: false }, env)
            }
        }
    }

    fn read(&self) -> &Read<R::Guid, R::Version> {
        self.read.as_ref().expect("an item read")
    }

    fn deletes(&self) -> bool {
        self.read.as_ref().is_some_and(|r| r.fail_closed)
    }

    /// The request sent last, whose answer the machine waits for.
    pub fn request(&self) -> Option<&Req<R::Guid, R::Version>> {
        self.pending.as_ref().map(|p| &p.req)
    }

    fn forced(&self, w: Write) -> Forced {
        match w {
            Write::Free { ended_session } => Forced::Freed {
                deleted: self.deletes(),
                ended_session,
            },
            Write::Revoke { lease, .. } => Forced::Revoked { free_after_ms: lease },
        }
    }

    /// Writes `w` on the lock's item, at the version read.
    fn write<E>(&mut self, w: Write, env: &Env) -> ForceStep<R, E> {
        let r = self.read();
        let (read, new_guid, now_unix_ms) = (r.version.clone(), self.new_guid.clone(), env.unix_ms);
        let req = match w {
            Write::Free { .. } => Req::ForceFree {
                read,
                new_guid,
                now_unix_ms,
                delete: self.deletes(),
            },
            Write::Revoke { lease, session } => Req::Revoke {
                read,
                new_guid,
                now_unix_ms,
                session: session.then(|| (r.session.clone().unwrap_or_default(), lease)),
            },
        };
        self.send(Doing::Writing(w), req, env)
    }

    /// The session's item as read: revoke out of a live session (named on it first), or free
    /// the lock of one that ended.
    fn session_read<E>(&mut self, s: Option<R>, env: &Env) -> ForceStep<R, E> {
        let lease = s
            .and_then(|s| s.lease_duration_ms())
            .filter(|&l| l != RELEASED_LEASE_MS);
        let (Some(lease), Some(guid)) = (lease, self.read().guid.clone()) else {
            return self.write(Write::Free { ended_session: true }, env);
        };
        let then = Write::Revoke { lease, session: true };
        if broken::on(Broken::ForceRevokesFirst) {
            return self.write(then, env);
        }
        let session = self.read().session.clone().unwrap_or_default();
        self.send(Doing::Marking { then }, Req::MarkRevoked { session, guid }, env)
    }

    /// A write on the lock's item was refused: the item moved on; read it again while reads
    /// are left.
    fn again<E>(&mut self, env: &Env) -> ForceStep<R, E> {
        if self.reads >= TRIES {
            return Step::Done(Err(Failure::Refused(Refusal::TriedOut)));
        }
        self.reads += 1;
        self.send(Doing::Reading, Req::Get, env)
    }

    fn ended<E>(&mut self, ended: Ended<R, E>, env: &Env) -> ForceStep<R, E> {
        let doing = self.doing.clone();
        match (doing, ended) {
            (_, Ended::Failed { error, .. }) => Step::Done(Err(Failure::Failed(error))),
            (Doing::Reading, Ended::Ok(Reply::Before(r))) => self.judge(r, env),
            (Doing::ReadingSession, Ended::Ok(Reply::Before(s))) => self.session_read(s, env),
            (Doing::Marking { then }, Ended::Ok(_)) => self.write(then, env),
            // An ended session refuses the name: at once, the lock is freed all the same.
            (Doing::Marking { then }, Ended::Refused { .. }) if self.now => self.write(then, env),
            (Doing::Marking { .. }, Ended::Refused { .. }) => Step::Done(Err(Failure::Refused(Refusal::SessionEnded))),
            (Doing::Writing(w @ Write::Revoke { session: true, .. }), Ended::Ok(_))
                if broken::on(Broken::ForceRevokesFirst) =>
            {
                let session = self.read().session.clone().unwrap_or_default();
                let guid = self.read().guid.clone().expect("a guid");
                let forced = self.forced(w);
                self.send(Doing::MarkingLate(forced), Req::MarkRevoked { session, guid }, env)
            }
            (Doing::Writing(w), Ended::Ok(_)) => Step::Done(Ok(self.forced(w))),
            (Doing::Writing(w), Ended::Refused { ambiguous, .. }) => {
                self.maybe = ambiguous.then_some(w);
                self.again(env)
            }
            (Doing::MarkingLate(forced), _) => Step::Done(Ok(forced)),
            // A read is never refused, and answers with the item.
            (_, other) => unreachable!(
                "a forced release's request answered {:?}",
                std::mem::discriminant(&other)
            ),
        }
    }
}

/// Who holds a lock, as far as a forced release tells holders apart: the fencing token and
/// owner, and the `guid` of a FailClosed holder, which has no token and keeps its `guid` while
/// it holds (another holder of one owner differs in it alone). Any other holder rotates its
/// `guid` at every heartbeat, so that its `guid` does not tell it apart.
type Holder<G> = (Option<u64>, Option<String>, Option<G>);

fn holder<R: Record>(r: &R) -> Holder<R::Guid> {
    let guid = match fail_closed(r) {
        true => r.guid(),
        false => None,
    };
    (r.fencing_token(), r.owner().map(str::to_string), guid)
}

/// A FailClosed lock's item: no lease, and no semaphore's permits.
fn fail_closed<R: Record>(r: &R) -> bool {
    r.lease_duration_ms().is_none() && r.permits().is_none()
}

impl<R: Record + Clone, E> Machine<R, E> for Force<R> {
    type Out = Out<E>;

    fn purpose(&self) -> Purpose {
        Purpose::Releasing
    }

    /// An operator's requests are not the lock protocol's own.
    fn counted(&self) -> bool {
        false
    }

    fn answer(&mut self, a: Answer<R, E>, env: &Env) -> ForceStep<R, E> {
        let pending = self.pending.as_mut().expect("a request sent");
        match pending.answer(a, env) {
            Next::Step(step) => step,
            Next::Ended(ended) => self.ended(ended, env),
        }
    }

    fn timer(&mut self, env: &Env) -> ForceStep<R, E> {
        self.pending.as_mut().expect("a request sent").resend(env.now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{GuidValue, LockRecord, GUID_LEN};
    use crate::op;
    use crate::request::Adds;
    use crate::testing::{env, ms};

    type Step = crate::request::Step<[u8; GUID_LEN], crate::item::Version, Out<&'static str>>;

    const NEW: [u8; GUID_LEN] = [9; GUID_LEN];

    /// A lock item held by `owner` with `guid` byte `g`, token `token`, a 1 s lease.
    fn held(owner: &str, g: u8, token: u64) -> LockRecord {
        LockRecord {
            owner: Some(owner.into()),
            guid: Some(GuidValue::B(vec![g; GUID_LEN])),
            fencing_token: Some(token),
            lease_duration_ms: Some(1000),
            ..Default::default()
        }
    }

    fn through_session(mut r: LockRecord) -> LockRecord {
        r.session = Some("s1".into());
        r
    }

    /// The lock's item and its session's, and what each request found there.
    struct Table {
        lock: Option<LockRecord>,
        session: Option<LockRecord>,
        sent: Vec<String>,
    }

    impl Table {
        /// Runs `m` from `step` against the items; `between(n, table)` runs before request
        /// `n` lands (a holder's heartbeat, a lost answer).
        fn run(
            &mut self,
            m: &mut Force<LockRecord>,
            mut step: Step,
            mut between: impl FnMut(usize, &mut Table) -> bool,
        ) -> Out<&'static str> {
            let fields = crate::testing::fields("operator", 1000);
            let adds = Adds {
                fields,
                ttl_released: None,
            };
            loop {
                let req = match step {
                    crate::request::Step::Done(out) => return out,
                    crate::request::Step::Send { req, .. } => req,
                    crate::request::Step::Wait { .. } => {
                        step = Machine::<LockRecord, &'static str>::timer(m, &env(0));
                        continue;
                    }
                };
                let n = self.sent.len();
                self.sent.push(format!(
                    "{}{}",
                    req_name(&req),
                    if req.session().is_some() { " (session)" } else { "" }
                ));
                let lose_answer = between(n, self);
                let parts = req.parts(&adds);
                let op = req.op::<LockRecord>(&adds, &parts);
                let item = match req.session() {
                    Some(_) => &mut self.session,
                    None => &mut self.lock,
                };
                let answer = if op::allowed(&op, item.as_ref()) {
                    let (after, reply) = op::apply(&op, item.take());
                    *item = after;
                    crate::request::answer_of(reply)
                } else {
                    Answer::Refused(Some(item.clone()))
                };
                let answer = match lose_answer {
                    true => Answer::Failed {
                        error: "timeout",
                        transient: true,
                        maybe_applied: true,
                    },
                    false => answer,
                };
                step = m.answer(answer, &env(0));
            }
        }
    }

    fn req_name<G, V>(r: &Req<G, V>) -> &'static str {
        match r {
            Req::Get => "get",
            Req::ReadSession { .. } => "read",
            Req::MarkRevoked { .. } => "mark",
            Req::Revoke { session: Some(_), .. } => "revoke out of the session",
            Req::Revoke { .. } => "revoke",
            Req::ForceFree { delete: true, .. } => "delete",
            Req::ForceFree { .. } => "free",
            _ => "other",
        }
    }

    fn force(now: bool, table: &mut Table, between: impl FnMut(usize, &mut Table) -> bool) -> Out<&'static str> {
        let (mut m, step) = Force::start(now, NEW, ms(100), table.lock.clone(), &env(0));
        table.run(&mut m, step, between)
    }

    fn table(lock: Option<LockRecord>, session: Option<LockRecord>) -> Table {
        Table {
            lock,
            session,
            sent: Vec::new(),
        }
    }

    #[test]
    fn a_failopen_holder_is_revoked_on_the_version_read_and_keeps_its_lease() {
        let mut t = table(Some(held("h", 1, 7)), None);
        assert_eq!(
            force(false, &mut t, |_, _| false),
            Ok(Forced::Revoked { free_after_ms: 1000 })
        );
        assert_eq!(t.sent, ["revoke"]);
        let after = t.lock.unwrap();
        assert!(after.carries(&NEW), "a new guid");
        assert_eq!((after.fencing_token, after.lease_duration_ms), (Some(7), Some(1000)));
    }

    #[test]
    fn a_session_lock_is_named_on_the_session_before_it_is_revoked_with_the_sessions_lease() {
        let mut session = held("h", 5, 1);
        session.lease_duration_ms = Some(4000);
        let mut t = table(Some(through_session(held("h", 1, 7))), Some(session));
        assert_eq!(
            force(false, &mut t, |_, _| false),
            Ok(Forced::Revoked { free_after_ms: 4000 })
        );
        assert_eq!(
            t.sent,
            ["read (session)", "mark (session)", "revoke out of the session"]
        );
        assert_eq!(t.session.unwrap().revoked, vec![vec![1; GUID_LEN]]);
        let lock = t.lock.unwrap();
        assert_eq!((lock.session, lock.lease_duration_ms), (None, Some(4000)));
    }

    #[test]
    fn a_lock_of_an_ended_session_is_freed_at_once_with_nobody_to_tell() {
        for session in [
            None,
            Some(LockRecord {
                lease_duration_ms: Some(RELEASED_LEASE_MS),
                ..held("h", 5, 1)
            }),
        ] {
            let mut t = table(Some(through_session(held("h", 1, 7))), session);
            let out = force(false, &mut t, |_, _| false);
            assert_eq!(
                out,
                Ok(Forced::Freed {
                    deleted: false,
                    ended_session: true
                })
            );
            assert_eq!(t.sent, ["read (session)", "free"]);
            assert_eq!(t.lock.unwrap().lease_duration_ms, Some(RELEASED_LEASE_MS));
        }
    }

    #[test]
    fn a_session_that_ends_before_the_mark_stops_the_revocation() {
        let mut t = table(Some(through_session(held("h", 1, 7))), Some(held("h", 5, 1)));
        let out = force(false, &mut t, |n, t| {
            if n == 1 {
                t.session.as_mut().unwrap().lease_duration_ms = Some(RELEASED_LEASE_MS);
            }
            false
        });
        assert_eq!(out, Err(Failure::Refused(Refusal::SessionEnded)));
        assert!(t.lock.unwrap().carries(&[1; GUID_LEN]), "the lock is left alone");
    }

    #[test]
    fn a_failclosed_lock_is_only_freed_at_once_by_deleting_it() {
        let fail_closed = LockRecord {
            lease_duration_ms: None,
            fencing_token: None,
            ..held("h", 1, 0)
        };
        let mut t = table(Some(fail_closed.clone()), None);
        assert_eq!(
            force(false, &mut t, |_, _| false),
            Err(Failure::Refused(Refusal::CannotBeTold))
        );
        assert!(t.sent.is_empty() && t.lock.is_some());
        assert_eq!(
            force(true, &mut t, |_, _| false),
            Ok(Forced::Freed {
                deleted: true,
                ended_session: false
            })
        );
        assert_eq!(t.sent, ["delete"]);
        assert!(t.lock.is_none());
    }

    #[test]
    fn at_once_a_session_lock_is_named_then_released_even_if_the_session_ended() {
        for live in [true, false] {
            let session = live.then(|| held("h", 5, 1));
            let mut t = table(Some(through_session(held("h", 1, 7))), session);
            assert_eq!(
                force(true, &mut t, |_, _| false),
                Ok(Forced::Freed {
                    deleted: false,
                    ended_session: false
                })
            );
            assert_eq!(t.sent, ["mark (session)", "free"]);
            assert_eq!(t.lock.unwrap().lease_duration_ms, Some(RELEASED_LEASE_MS));
        }
    }

    #[test]
    fn a_holder_that_renews_meanwhile_is_read_again_and_another_holder_is_left_alone() {
        // The holder's heartbeat rotates its guid before the first revocation lands.
        let mut t = table(Some(held("h", 1, 7)), None);
        let out = force(false, &mut t, |n, t| {
            if n == 0 {
                t.lock = Some(held("h", 2, 7));
            }
            false
        });
        assert_eq!(out, Ok(Forced::Revoked { free_after_ms: 1000 }));
        assert_eq!(t.sent, ["revoke", "get", "revoke"]);
        // Another holder took the lock meanwhile.
        let mut t = table(Some(held("h", 1, 7)), None);
        let out = force(false, &mut t, |n, t| {
            if n == 0 {
                t.lock = Some(held("other", 3, 8));
            }
            false
        });
        assert_eq!(out, Err(Failure::Refused(Refusal::Changed)));
        assert!(t.lock.unwrap().carries(&[3; GUID_LEN]));
    }

    #[test]
    fn a_failclosed_lock_taken_again_by_the_same_owner_meanwhile_is_left_alone() {
        let fail_closed = |g: u8| LockRecord {
            owner: Some("h".into()),
            guid: Some(GuidValue::B(vec![g; GUID_LEN])),
            ..Default::default()
        };
        // Released and taken again, by the same owner, before the deletion lands.
        let mut t = table(Some(fail_closed(1)), None);
        let out = force(true, &mut t, |n, t| {
            if n == 0 {
                t.lock = Some(fail_closed(2));
            }
            false
        });
        assert_eq!(out, Err(Failure::Refused(Refusal::Changed)));
        assert!(t.lock.unwrap().carries(&[2; GUID_LEN]), "the new holder keeps its lock");
    }

    #[test]
    fn a_holder_that_renews_before_every_write_is_given_up_on_after_the_last_read() {
        let mut t = table(Some(held("h", 1, 7)), None);
        let out = force(false, &mut t, |n, t| {
            if req_is_write(&t.sent[n]) {
                t.lock = Some(held("h", 10 + n as u8, 7));
            }
            false
        });
        assert_eq!(out, Err(Failure::Refused(Refusal::TriedOut)));
        assert_eq!(t.sent.iter().filter(|s| *s == "get").count() as u32, TRIES - 1);
        assert_eq!(t.sent.iter().filter(|s| *s == "revoke").count() as u32, TRIES);
    }

    fn req_is_write(name: &str) -> bool {
        name != "get" && !name.starts_with("read")
    }

    #[test]
    fn a_write_whose_answer_was_lost_is_found_on_the_next_read() {
        let mut t = table(Some(held("h", 1, 7)), None);
        let out = force(false, &mut t, |n, _| n < ATTEMPTS as usize);
        assert_eq!(out, Err(Failure::Failed("timeout")), "every attempt's answer lost");
        // The first attempt lands and its answer is lost; the second is refused by the first.
        let mut t = table(Some(held("h", 1, 7)), None);
        assert_eq!(
            force(false, &mut t, |n, _| n == 0),
            Ok(Forced::Revoked { free_after_ms: 1000 })
        );
        assert_eq!(t.sent, ["revoke", "revoke", "get"]);
        // A deletion likewise.
        let fc = LockRecord {
            lease_duration_ms: None,
            ..held("h", 1, 0)
        };
        let mut t = table(Some(fc), None);
        assert_eq!(
            force(true, &mut t, |n, _| n == 0),
            Ok(Forced::Freed {
                deleted: true,
                ended_session: false
            })
        );
        assert_eq!(t.sent, ["delete", "delete", "get"]);
    }

    #[test]
    fn free_absent_shared_and_unnamed_items_are_told_apart() {
        assert_eq!(force(false, &mut table(None, None), |_, _| false), Ok(Forced::Absent));
        let released = LockRecord {
            lease_duration_ms: Some(RELEASED_LEASE_MS),
            ..held("h", 1, 7)
        };
        assert_eq!(
            force(false, &mut table(Some(released), None), |_, _| false),
            Ok(Forced::AlreadyFree)
        );
        let mut corrupt = held("h", 1, 7);
        corrupt.fencing_token = None;
        corrupt.malformed = Some(Box::new(crate::item::Malformed {
            attribute: crate::item::FENCING_TOKEN,
            found: "N 1.5".into(),
        }));
        let out = force(false, &mut table(Some(corrupt), None), |_, _| false);
        assert_eq!(out, Err(Failure::Refused(Refusal::Unnamed)));
        let head = LockRecord {
            lease_duration_ms: None,
            ..held("h", 1, 7)
        };
        let mut sem = head.clone();
        op::Record::set_permits(&mut sem, 3);
        assert_eq!(
            force(false, &mut table(Some(sem), None), |_, _| false),
            Ok(Forced::AlreadyFree),
            "no holder"
        );
        let _ = head;
    }
}
