//! Deliberately broken variants of the protocol, for the model checker and the simulator to
//! show that they can fail: each is a hook in the machine it breaks. They exist only with the
//! `broken` feature, which the addon never enables; without it every hook is a constant
//! `false` and compiles away.

/// A deliberate break of the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Broken {
    /// A heartbeat answer that arrives after the lease's end extends the lease.
    LateReplyExtends,
    /// The loss of a lease is decided only when a heartbeat attempt starts, not at the
    /// deadline itself.
    LostAfterDeadline,
    /// The next heartbeat is due a period after the last, even past the lease's end: with a
    /// period as long as the lease or longer, the loss waits for that heartbeat.
    LossUnwatchedBetweenBeats,
    /// A FailClosed acquisition whose write may have landed reports its failure without
    /// reading the item back or undoing the write.
    AmbiguousNotResolved,
    /// A FailClosed acquisition cancelled while its write was out reports itself aborted when
    /// the write does not plainly succeed, without settling whether it landed: its own write
    /// may stay on the item, held by nobody.
    CancelSkipsSettle,
    /// A FailOpen acquisition cancelled while its take was out reports itself aborted when the
    /// take does not plainly succeed, without settling whether it landed: the take may stay
    /// on the item, held by nobody.
    CancelledTakeSkipsSettle,
    /// A FailClosed release takes a timed-out delete for done.
    TimeoutIsReleased,
    /// A FailOpen holder counts its lease from the reply instead of from the send.
    LeaseFromReply,
    /// A FailOpen lock handed to the next acquisition of the same client counts its lease
    /// from the hand-over's answer instead of from its send.
    HandOverLeaseFromReply,
    /// A lock handed over when every acquisition in line had given up is released with the
    /// `guid`s it had before the hand-over, not with the one the hand-over wrote.
    UnclaimedHandOverForgetsGuid,
    /// An acquisition that gave up while it waited in the client's line stays in it: the
    /// lock is handed to it, and nobody holds or releases it.
    LineKeepsQuitter,
    /// A FailOpen take that landed but grants nothing (answered after its whole lease) is
    /// reported failed without giving the lock back.
    ExpiredTakeKept,
    /// A FailOpen waiter starts its wait over at every re-read, changed or not.
    RereadRestartsWait,
    /// A FailOpen release that does not wait for the heartbeat on the wire: it writes with the
    /// `guid` it knows, and that heartbeat may land after it.
    ReleaseSkipsHeartbeat,
    /// A Fifo grant without the condition that the head's token is below the ticket.
    FifoGrantIgnoresToken,
    /// A Fifo acquisition that gives up without releasing a grant that may have landed.
    FifoGiveUpKeepsGrant,
    /// A waiter that has waited out a session takes the session's lock without ending the
    /// session first.
    TakeoverSkipsSessionEnd,
    /// A session renewal without its condition that the session is not ended: a renewal
    /// written before a waiter ended the session and landing after it revives the session.
    RenewRevivesEnded,
    /// A semaphore grant or take that does not count the permits held.
    SemGrantIgnoresHeld,
    /// A semaphore waiter that takes an entry ahead of it that still waits for finished: it
    /// is granted before an earlier ticket.
    SemGrantIgnoresEarlier,
    /// A semaphore's uncontended take without its condition that the head has no holder of
    /// its `guid`: an attempt sent again after one that landed counts the permits twice.
    SemTakeRepeats,
    /// A semaphore's uncontended take while tickets are out: a shared or small request taken
    /// past an exclusive or larger one that waits.
    SemTakePastWaiter,
    /// A lock abandoned without a release (its client closed) is reported lost at the end of
    /// its lease, not a timer grain before it: a rival may be granted the lock first.
    AbandonedLapsesLate,
    /// A write of the holder's data (`lock.update`) may take all that is left of the lease,
    /// not half: heartbeats parked behind it resume too late to declare the loss in time.
    UpdateTakesWholeLease,
    /// A lock whose heartbeat waits for a write of the holder's data declares no loss while it
    /// waits, even once its lease has run out (its process was paused past it).
    ParkedMissesLapse,
    /// A client whose session's renewal names a lock an operator revoked goes on holding it.
    RevocationIgnored,
    /// An operator's revocation of a lock held through a session revokes the lock before it
    /// names it on the session's item.
    ForceRevokesFirst,
}

impl Broken {
    /// The variants of the heartbeat's timing (the lease-timing model and the simulator).
    pub const TIMING: [Broken; 2] = [Broken::LateReplyExtends, Broken::LostAfterDeadline];
    /// The variants of the heartbeat's timing that show with a period as long as the lease or
    /// longer (the lease-timing model with such a period).
    pub const LONG_PERIOD: [Broken; 1] = [Broken::LossUnwatchedBetweenBeats];
    /// The variants of a lock abandoned by `close()` (the lease-timing model with a close, and
    /// the simulator).
    pub const CLOSE: [Broken; 1] = [Broken::AbandonedLapsesLate];
    /// The variants of `lock.update` (the lease-timing model with an update).
    pub const UPDATE: [Broken; 2] = [Broken::UpdateTakesWholeLease, Broken::ParkedMissesLapse];
    /// The variants of Fifo (the Fifo machines model and the simulator).
    pub const FIFO: [Broken; 2] = [Broken::FifoGrantIgnoresToken, Broken::FifoGiveUpKeepsGrant];
    /// The variants of sessions (the session model and the simulator): the session's own, and
    /// a hand-over's within a session.
    pub const SESSION: [Broken; 3] = [
        Broken::TakeoverSkipsSessionEnd,
        Broken::RenewRevivesEnded,
        Broken::UnclaimedHandOverForgetsGuid,
    ];
    /// The variants of semaphores (the Fifo machines model with permits, and the simulator).
    pub const SEMAPHORE: [Broken; 4] = [
        Broken::SemGrantIgnoresHeld,
        Broken::SemGrantIgnoresEarlier,
        Broken::SemTakeRepeats,
        Broken::SemTakePastWaiter,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Broken::LateReplyExtends => "heartbeat answer after the lease's end extends the lease",
            Broken::LostAfterDeadline => "loss of the lease decided after the deadline",
            Broken::LossUnwatchedBetweenBeats => "loss deadline not watched between heartbeats",
            Broken::AmbiguousNotResolved => "FailClosed ambiguous acquisition neither read back nor undone",
            Broken::CancelSkipsSettle => "FailClosed cancelled acquisition that leaves its landed write behind",
            Broken::CancelledTakeSkipsSettle => "FailOpen cancelled acquisition that leaves its landed take behind",
            Broken::TimeoutIsReleased => "FailClosed release that takes a timeout for success",
            Broken::LeaseFromReply => "FailOpen lease counted from the reply, not the send",
            Broken::HandOverLeaseFromReply => "hand-over whose lease counts from the reply, not the send",
            Broken::UnclaimedHandOverForgetsGuid => "hand-over nobody took, released without the guid it wrote",
            Broken::LineKeepsQuitter => "local line that hands the lock to a waiter that gave up",
            Broken::ExpiredTakeKept => "FailOpen take answered after its lease, reported failed and not given back",
            Broken::RereadRestartsWait => "FailOpen waiter that restarts its wait at every re-read",
            Broken::ReleaseSkipsHeartbeat => "FailOpen release without waiting for the in-flight heartbeat",
            Broken::FifoGrantIgnoresToken => "Fifo grant without the token-below-ticket condition",
            Broken::FifoGiveUpKeepsGrant => "Fifo give-up that keeps a grant that may have landed",
            Broken::TakeoverSkipsSessionEnd => "takeover of a session's lock that does not end the session first",
            Broken::RenewRevivesEnded => "session renewal without its condition that the session is not ended",
            Broken::SemGrantIgnoresHeld => "semaphore grant that does not count the permits held",
            Broken::SemGrantIgnoresEarlier => "semaphore waiter granted past an earlier waiter",
            Broken::SemTakeRepeats => "semaphore take that a repeated attempt applies twice",
            Broken::SemTakePastWaiter => "semaphore take while an earlier request waits",
            Broken::AbandonedLapsesLate => "lock abandoned by close() reported lost at its lease's end, not before",
            Broken::UpdateTakesWholeLease => "lock.update that may take all that is left of the lease",
            Broken::ParkedMissesLapse => "heartbeat waiting for lock.update that declares no loss past the lease",
            Broken::RevocationIgnored => "session holder that ignores a revocation its session's renewal reads back",
            Broken::ForceRevokesFirst => {
                "operator's revocation that revokes a session's lock before naming it on the session's item"
            }
        }
    }
}

#[cfg(feature = "broken")]
thread_local! {
    static ON: std::cell::Cell<Option<Broken>> = const { std::cell::Cell::new(None) };
}

/// Whether `b` is the variant in force on this thread.
#[inline]
pub fn on(b: Broken) -> bool {
    #[cfg(feature = "broken")]
    {
        ON.with(|on| on.get() == Some(b))
    }
    #[cfg(not(feature = "broken"))]
    {
        let _ = b;
        false
    }
}

/// Puts a variant in force on this thread (`None`: the protocol as it ships).
#[cfg(feature = "broken")]
pub fn set(b: Option<Broken>) {
    ON.with(|on| on.set(b));
}
