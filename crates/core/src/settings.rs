//! Every default of a client's settings, and the lease arithmetic that derives one setting from
//! another. The option names are the JavaScript ones (`retryCount`, `leaseDurationMs`, ...);
//! a default applies where the option is not given.

use std::time::Duration;

use crate::item;
use crate::op::{OpenFields, Ttl};

/// The kind of lock a client takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    FailClosed,
    FailOpen,
    Fifo,
}

/// `retryCount`: FailClosed and FailOpen acquisitions try again once after a held lock.
pub const RETRY_COUNT: u32 = 1;
/// `acquirePeriodMs`: FailClosed tries again at once.
pub const ACQUIRE_PERIOD: Duration = Duration::ZERO;
/// `leaseDurationMs`: none (validation asks for it where a kind needs it).
pub const LEASE_DURATION_MS: u64 = 0;
/// `trustLocalTime`: a waiter counts a lease on its own clock only.
pub const TRUST_LOCAL_TIME: bool = false;
/// `rereadPeriodMs`, where a lease does not make it shorter (`reread`).
pub const REREAD_PERIOD: Duration = Duration::from_millis(10);
/// The re-read interval of FailOpen waiters other than the first, at most (`later_waiter_reread`).
pub const LATER_WAITER_REREAD_PERIOD: Duration = Duration::from_millis(250);
/// `requestTimeoutMs`: the longest wait for one DynamoDB answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_millis(5000);
/// `dangerMarginMs` without a lease to take a third of (`danger_margin`).
pub const DANGER_MARGIN: Duration = Duration::ZERO;
/// Attempts of one request through transient faults (throttling, 5xx, timeouts).
pub const MAX_ATTEMPTS: u32 = 4;
/// Attempts of a release, at least: a lost release leaves a lock held.
pub const RELEASE_MAX_ATTEMPTS: u32 = 8;
/// The first pause between attempts of a request, before jitter; it doubles with each attempt.
pub const RETRY_BASE_BACKOFF: Duration = Duration::from_millis(25);
/// The longest pause between attempts of a request, before jitter.
pub const RETRY_MAX_BACKOFF: Duration = Duration::from_millis(1000);
/// FailOpen's `ttlSeconds`: an hour past the lease, so a held lock's item can never go while it
/// is held (heartbeats move it on), and a released one goes an hour after.
pub const OPEN_TTL_SECONDS: u64 = 3600;
/// Fifo's `ttlAttribute`.
pub const FIFO_TTL_ATTRIBUTE: &str = "ttl";
/// Fifo's `waitMs`: how long an acquisition waits.
pub const FIFO_WAIT: Duration = Duration::from_secs(60);

/// The first waiter's re-read interval (`rereadPeriodMs`): 10 ms, or a quarter of a shorter
/// lease.
pub fn reread(lease_duration_ms: u64) -> Duration {
    if lease_duration_ms == 0 {
        return REREAD_PERIOD;
    }
    Duration::from_millis((lease_duration_ms / 4).clamp(1, REREAD_PERIOD.as_millis() as u64))
}

/// Other waiters re-read at a quarter of the lease, between the first waiter's interval
/// `reread` and 250 ms.
pub fn later_waiter_reread(lease_duration_ms: u64, reread: Duration) -> Duration {
    Duration::from_millis(lease_duration_ms / 4)
        .min(LATER_WAITER_REREAD_PERIOD)
        .max(reread)
}

/// `dangerMarginMs`: a third of the lease.
pub fn danger_margin(lease_duration_ms: u64) -> Duration {
    Duration::from_millis(lease_duration_ms / 3)
}

/// Fifo's `heartbeatPeriodMs`: a third of the lease.
pub fn fifo_heartbeat(lease_duration_ms: u64) -> Duration {
    Duration::from_millis((lease_duration_ms / 3).max(1))
}

/// The shortest age at which a FailClosed waiter renews its first-in-line mark, where
/// `acquirePeriodMs` is shorter: a waiter that tries again at once must not write its mark at
/// every try.
pub const MARK_RENEW_MIN: Duration = Duration::from_millis(1000);

/// What the acquisition and release machines need to know of a client's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lock {
    pub kind: Kind,
    /// `retryCount`.
    pub retry_count: u32,
    /// `acquirePeriodMs` (FailClosed).
    pub acquire_period: Duration,
    /// `leaseDurationMs` (FailOpen).
    pub lease_duration_ms: u64,
    /// `trustLocalTime`.
    pub trust_local_time: bool,
    /// FailOpen: the holder's `heartbeatPeriodMs` (zero: none). A waiter renews its
    /// first-in-line mark no more often than a holder renews its lease.
    pub heartbeat_period: Duration,
    /// The first waiter's first re-read interval (`rereadPeriodMs`).
    pub reread: Duration,
    /// Other waiters' re-read interval.
    pub later_waiter_reread: Duration,
    /// `requestTimeoutMs`.
    pub request_timeout: Duration,
    /// Attempts of one request through transient faults.
    pub max_attempts: u32,
    /// The first pause between attempts of a request, and the longest (before jitter).
    pub base_backoff: Duration,
    pub max_backoff: Duration,
    /// `dangerMarginMs`: `"danger"` is told when this little of the lease is left without a
    /// heartbeat.
    pub danger_margin: Duration,
}

/// The options a client was given, as validation let them through; `None` where one was not
/// given (its default then applies, `Lock::given`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Given {
    pub retry_count: Option<u32>,
    pub acquire_period: Option<Duration>,
    pub lease_duration_ms: Option<u64>,
    pub heartbeat_period: Option<Duration>,
    pub trust_local_time: Option<bool>,
    pub reread: Option<Duration>,
    pub request_timeout: Option<Duration>,
    pub danger_margin: Option<Duration>,
}

/// `ttlSeconds` of a `kind` client with a `ttlAttribute`, given `seconds` or not: as given,
/// or FailOpen's default; none for Fifo, whose entries' TTL follows their lease (and FailClosed
/// without it is refused by validation).
pub fn ttl_seconds(kind: Kind, seconds: Option<u64>) -> Option<u64> {
    match (kind, seconds) {
        (Kind::Fifo, _) => None,
        (_, Some(s)) => Some(s),
        (Kind::FailOpen, None) => Some(OPEN_TTL_SECONDS),
        (Kind::FailClosed, None) => None,
    }
}

/// How a FailClosed or FailOpen client marks its items for DynamoDB's TTL (`ttlAttribute`,
/// `ttlSeconds`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Expiry {
    /// The Number attribute the table's TTL reads (Unix seconds).
    pub attribute: String,
    /// FailClosed: how long after its last write a held or abandoned item may be deleted.
    /// FailOpen: how long past the end of the lease (held) or the release (released).
    pub seconds: u64,
}

impl Expiry {
    /// The TTL a holder's write at `now_unix_ms` sets: `seconds` after it, past the end of the
    /// lease for FailOpen (rounded up to whole seconds). Fifo items carry their own.
    pub fn held(&self, s: &Lock, now_unix_ms: u64) -> Option<Ttl<'_>> {
        let lease_s = match s.kind {
            Kind::FailOpen => s.lease_duration_ms.div_ceil(1000),
            Kind::FailClosed => 0,
            Kind::Fifo => return None,
        };
        Some((&self.attribute, now_unix_ms / 1000 + lease_s + self.seconds))
    }

    /// The TTL a release at `now_unix_ms` sets: `seconds` after it.
    pub fn released(&self, now_unix_ms: u64) -> Ttl<'_> {
        (&self.attribute, now_unix_ms / 1000 + self.seconds)
    }
}

/// What a write of `owner`'s at `now_unix_ms` puts on a lock it takes or renews, no data:
/// its lease, FailOpen's time of acquisition, the TTL, and the fencing token's floor (above
/// every token an item that TTL may have deleted had, `item::token_floor`).
pub fn open_fields<'a>(s: &Lock, owner: &'a str, expiry: Option<&'a Expiry>, now_unix_ms: u64) -> OpenFields<'a> {
    OpenFields {
        owner,
        lease_duration_ms: s.lease_duration_ms,
        lock_acquired_time_unix_ms: (s.kind == Kind::FailOpen).then_some(now_unix_ms),
        data: None,
        ttl: expiry.and_then(|e| e.held(s, now_unix_ms)),
        token_floor: expiry.map_or(0, |_| item::token_floor(now_unix_ms)),
        session: None,
    }
}

impl Lock {
    /// A `kind` client's settings with every default (`heartbeat_period` none).
    pub fn new(kind: Kind) -> Lock {
        Lock {
            kind,
            retry_count: RETRY_COUNT,
            acquire_period: ACQUIRE_PERIOD,
            lease_duration_ms: LEASE_DURATION_MS,
            trust_local_time: TRUST_LOCAL_TIME,
            heartbeat_period: Duration::ZERO,
            reread: REREAD_PERIOD,
            later_waiter_reread: LATER_WAITER_REREAD_PERIOD,
            request_timeout: REQUEST_TIMEOUT,
            max_attempts: MAX_ATTEMPTS,
            base_backoff: RETRY_BASE_BACKOFF,
            max_backoff: RETRY_MAX_BACKOFF,
            danger_margin: DANGER_MARGIN,
        }
    }

    /// A `kind` client's settings from the options `o` it was given, each default applied
    /// where one is not: Fifo heartbeats at a third of the lease unless told otherwise; a
    /// waiter re-reads at `reread` of the lease (a zero `rereadPeriodMs` counts as not given),
    /// other waiters at `later_waiter_reread`; `"danger"` comes with a third of the lease left.
    pub fn given(kind: Kind, o: &Given) -> Lock {
        let lease_duration_ms = o.lease_duration_ms.unwrap_or(LEASE_DURATION_MS);
        let heartbeat_period = match (kind, o.heartbeat_period) {
            (_, Some(p)) if !p.is_zero() => p,
            (Kind::Fifo, _) => fifo_heartbeat(lease_duration_ms),
            _ => Duration::ZERO,
        };
        let first_reread = o
            .reread
            .filter(|d| !d.is_zero())
            .unwrap_or_else(|| reread(lease_duration_ms));
        Lock {
            retry_count: o.retry_count.unwrap_or(RETRY_COUNT),
            acquire_period: o.acquire_period.unwrap_or(ACQUIRE_PERIOD),
            lease_duration_ms,
            trust_local_time: o.trust_local_time.unwrap_or(TRUST_LOCAL_TIME),
            heartbeat_period,
            reread: first_reread,
            later_waiter_reread: later_waiter_reread(lease_duration_ms, first_reread),
            request_timeout: o.request_timeout.unwrap_or(REQUEST_TIMEOUT),
            danger_margin: o.danger_margin.unwrap_or_else(|| danger_margin(lease_duration_ms)),
            ..Lock::new(kind)
        }
    }

    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_duration_ms)
    }

    /// How often an acquisition that still waits says so (`"waiting"` with `progress`): about
    /// once a lease (FailClosed: its `acquirePeriodMs`), and at least a second apart.
    pub fn waiting_report_period(&self) -> Duration {
        self.lease().max(self.acquire_period).max(Duration::from_secs(1))
    }

    /// Attempts of a release: more than of other requests, since a lost release leaves a
    /// lock held.
    pub fn release_attempts(&self) -> u32 {
        self.max_attempts.max(RELEASE_MAX_ATTEMPTS)
    }

    /// The longest a `close()` waits for a lock's ending: an acquisition's attempts and a
    /// release's, each bounded by the request timeout.
    pub fn close_wait(&self) -> Duration {
        let attempts = self.max_attempts.max(1) + self.release_attempts();
        self.request_timeout.saturating_mul(attempts)
    }

    /// The longest pause between a waiter's re-reads: half the lease (FailOpen, Fifo), half of
    /// `acquirePeriodMs` (FailClosed), and never less than `rereadPeriodMs`. A long wait costs
    /// a read per this; a lock released during it is seen within this.
    pub fn reread_ceiling(&self) -> Duration {
        let half = match self.kind {
            Kind::FailOpen | Kind::Fifo => self.lease() / 2,
            Kind::FailClosed => self.acquire_period / 2,
        };
        half.max(self.reread)
    }

    /// How long a waiter pauses before it reads the item again, having waited `waited` for
    /// the same holder: `rereadPeriodMs` plus half of `waited`, up to `reread_ceiling`. So a
    /// lock released after a wait of W is seen within `rereadPeriodMs` + W/2 (a short hold is
    /// handed over within a fraction of its length), a long hold costs a read per ceiling, and
    /// a new holder starts the pace over. A read that found a new holder (`waited` zero) is
    /// followed by one at `rereadPeriodMs` whatever the waiter's place: while the lock changes
    /// hands every waiter reads at that pace, so the next release is seen at once and the mark
    /// of the first in line, which its taker clears, is claimed again before the next
    /// hand-over. Once a read finds the same holder again, waiters other than the first in
    /// line pause at least the queue interval; other FailClosed waiters only try at
    /// `acquirePeriodMs`, as the original does (`Duration::MAX`).
    pub fn reread_interval(&self, first: bool, waited: Duration) -> Duration {
        // Whole milliseconds: callers that count time in milliseconds wake when it is due.
        let half = Duration::from_millis((waited.as_millis() / 2).min(u64::MAX.into()) as u64);
        let grown = (self.reread + half).min(self.reread_ceiling());
        match (first, self.kind) {
            (true, _) => grown,
            (false, Kind::FailOpen | Kind::Fifo) if waited.is_zero() => grown,
            (false, Kind::FailOpen | Kind::Fifo) => grown.max(self.later_waiter_reread.min(self.reread_ceiling())),
            (false, Kind::FailClosed) => Duration::MAX,
        }
    }

    /// The age at which the first waiter renews its first-in-line mark, when it reads the
    /// item: a heartbeat period (FailOpen without heartbeats: a third of the lease), FailClosed
    /// `acquirePeriodMs` and at least `MARK_RENEW_MIN`. So a waiting process writes its mark
    /// no more often than a holder writes its heartbeats.
    pub fn mark_renew(&self) -> Duration {
        let d = match self.kind {
            Kind::FailOpen | Kind::Fifo if self.heartbeat_period.is_zero() => {
                Duration::from_millis(self.lease_duration_ms / 3)
            }
            Kind::FailOpen | Kind::Fifo => self.heartbeat_period,
            Kind::FailClosed => self.acquire_period.max(MARK_RENEW_MIN),
        };
        d.max(Duration::from_millis(1))
    }

    /// How often a Fifo waiter renews its queue entry: a heartbeat period, but no more often
    /// than every half lease. An entry is judged gone once it shows one version for a whole
    /// lease on a reader's clock, so half a lease leaves the other half for the write's round
    /// trip; and a waiter behind a long hold writes a few times a minute, not at a holder's
    /// pace (the head's holder heartbeats at its own period). A missed renewal costs the
    /// waiter its place in line, never a lock held twice.
    pub fn entry_renew(&self) -> Duration {
        self.mark_renew().max(Duration::from_millis(self.lease_duration_ms / 2))
    }

    /// How long a first-in-line mark stays fresh: a mark older than this no longer makes its
    /// writer first in line, and a releaser that reads it back no longer stands back for it.
    /// The first waiter renews its mark at the first read after `mark_renew`; reads come at
    /// most `reread_ceiling` apart, so a renewal is due within `mark_renew` and one ceiling,
    /// and one more ceiling covers a renewal that failed (the write is best effort).
    pub fn mark_fresh(&self) -> Duration {
        self.mark_renew() + self.reread_ceiling() * 2
    }

    /// How long an acquisition waiting in this client's line for another acquisition of the
    /// same lock waits for that holder before it gives up: what the original library would
    /// have waited (`retryCount` pauses of `acquirePeriodMs`, or `retryCount + 1` leases).
    pub fn line_patience(&self) -> Duration {
        match self.kind {
            Kind::FailClosed => self.acquire_period.saturating_mul(self.retry_count),
            Kind::FailOpen | Kind::Fifo => self.lease().saturating_mul(self.retry_count.saturating_add(1)),
        }
    }

    /// How long a client that released a lock while another process's waiter had marked it
    /// (or after waiting for it itself) stands back from taking it again, the lock having been
    /// held `held_for`: the first waiter's longest pause after a wait that long, and half a
    /// re-read more for its read's round trip. A waiter saw this holder at most `held_for`
    /// ago, so its next read falls within this and it takes the lock first.
    pub fn stand_back(&self, held_for: Duration) -> Duration {
        self.reread_interval(true, held_for) + self.reread / 2
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_holders_write_expires_past_its_lease_and_counts_tokens_from_the_floor_only_with_ttl() {
        let expiry = Expiry {
            attribute: "expires".into(),
            seconds: 3600,
        };
        let open = Lock {
            lease_duration_ms: 10_500,
            ..Lock::new(Kind::FailOpen)
        };
        let now = 1_784_000_000_400;
        assert_eq!(expiry.held(&open, now), Some(("expires", 1_784_000_000 + 11 + 3600)));
        assert_eq!(
            expiry.held(&Lock::new(Kind::FailClosed), now),
            Some(("expires", 1_784_000_000 + 3600))
        );
        assert_eq!(expiry.held(&Lock::new(Kind::Fifo), now), None);
        assert_eq!(expiry.released(now), ("expires", 1_784_000_000 + 3600));
        let f = open_fields(&open, "me", Some(&expiry), now);
        assert_eq!((f.owner, f.lease_duration_ms), ("me", 10_500));
        assert_eq!(f.lock_acquired_time_unix_ms, Some(now));
        assert_eq!(f.token_floor, item::token_floor(now));
        let f = open_fields(&Lock::new(Kind::FailClosed), "me", None, now);
        assert_eq!((f.lock_acquired_time_unix_ms, f.ttl, f.token_floor), (None, None, 0));
        let s = f.in_session("s1", now);
        assert_eq!(s.session, Some("s1"));
        assert_eq!(s.lease_duration_ms, item::SESSION_LOCK_LEASE_MS);
        assert_eq!(s.lock_acquired_time_unix_ms, Some(now));
    }

    #[test]
    fn close_waits_for_an_acquisitions_attempts_and_a_releases() {
        let s = Lock::new(Kind::FailClosed);
        assert_eq!(s.close_wait(), REQUEST_TIMEOUT * (MAX_ATTEMPTS + RELEASE_MAX_ATTEMPTS));
    }

    #[test]
    fn waiters_reread_at_a_quarter_of_the_lease_within_bounds() {
        assert_eq!(reread(0), Duration::from_millis(10));
        assert_eq!(reread(20), Duration::from_millis(5));
        assert_eq!(reread(2), Duration::from_millis(1));
        assert_eq!(reread(60_000), Duration::from_millis(10));
        assert_eq!(later_waiter_reread(400, reread(400)), Duration::from_millis(100));
        assert_eq!(later_waiter_reread(60_000, reread(60_000)), Duration::from_millis(250));
        assert_eq!(later_waiter_reread(8, reread(8)), Duration::from_millis(2));
    }

    #[test]
    fn a_waiting_acquisition_reports_about_once_a_lease_and_at_most_once_a_second() {
        let mut s = lock(Kind::FailOpen);
        s.acquire_period = Duration::ZERO;
        s.lease_duration_ms = 10_000;
        assert_eq!(s.waiting_report_period(), Duration::from_secs(10));
        s.lease_duration_ms = 100;
        assert_eq!(s.waiting_report_period(), Duration::from_secs(1));
        let mut closed = lock(Kind::FailClosed);
        closed.lease_duration_ms = 10_000;
        closed.acquire_period = Duration::from_secs(30);
        assert_eq!(closed.waiting_report_period(), Duration::from_secs(30));
    }

    #[test]
    fn danger_and_fifo_heartbeat_take_a_third_of_the_lease() {
        assert_eq!(danger_margin(3000), Duration::from_millis(1000));
        assert_eq!(fifo_heartbeat(3000), Duration::from_millis(1000));
        assert_eq!(fifo_heartbeat(2), Duration::from_millis(1), "never a zero period");
    }

    #[test]
    fn a_queue_entry_is_renewed_at_most_every_half_lease() {
        let mut s = lock(Kind::Fifo);
        assert_eq!(
            s.entry_renew(),
            Duration::from_millis(5000),
            "half of a 10 s lease, not the 3 s heartbeat"
        );
        s.heartbeat_period = Duration::from_millis(8000);
        assert_eq!(
            s.entry_renew(),
            Duration::from_millis(8000),
            "a period longer than half the lease stays"
        );
    }

    pub(crate) fn lock(kind: Kind) -> Lock {
        Lock {
            kind,
            retry_count: 1,
            acquire_period: Duration::from_millis(5000),
            lease_duration_ms: 10_000,
            trust_local_time: false,
            heartbeat_period: Duration::from_millis(3000),
            reread: reread(10_000),
            later_waiter_reread: later_waiter_reread(10_000, reread(10_000)),
            request_timeout: REQUEST_TIMEOUT,
            max_attempts: MAX_ATTEMPTS,
            base_backoff: RETRY_BASE_BACKOFF,
            max_backoff: RETRY_MAX_BACKOFF,
            danger_margin: danger_margin(10_000),
        }
    }

    #[test]
    fn options_not_given_take_their_defaults_from_the_lease() {
        let fifo = Lock::given(
            Kind::Fifo,
            &Given {
                lease_duration_ms: Some(3000),
                reread: Some(Duration::ZERO),
                ..Given::default()
            },
        );
        assert_eq!(
            fifo.heartbeat_period,
            Duration::from_millis(1000),
            "a third of the lease"
        );
        assert_eq!(fifo.danger_margin, Duration::from_millis(1000));
        assert_eq!(fifo.reread, Duration::from_millis(10), "a zero reread is not given");
        assert_eq!(fifo.later_waiter_reread, Duration::from_millis(250));
        assert_eq!((fifo.retry_count, fifo.request_timeout), (RETRY_COUNT, REQUEST_TIMEOUT));
        let open = Lock::given(
            Kind::FailOpen,
            &Given {
                lease_duration_ms: Some(400),
                heartbeat_period: Some(Duration::ZERO),
                danger_margin: Some(Duration::from_millis(7)),
                retry_count: Some(9),
                ..Given::default()
            },
        );
        assert_eq!(
            open.heartbeat_period,
            Duration::ZERO,
            "FailOpen heartbeats only when told"
        );
        assert_eq!(open.danger_margin, Duration::from_millis(7));
        assert_eq!(
            (open.reread, open.later_waiter_reread),
            (Duration::from_millis(10), Duration::from_millis(100))
        );
        assert_eq!(open.retry_count, 9);
        assert_eq!(ttl_seconds(Kind::FailOpen, None), Some(OPEN_TTL_SECONDS));
        assert_eq!(ttl_seconds(Kind::FailClosed, Some(60)), Some(60));
        assert_eq!(ttl_seconds(Kind::FailClosed, None), None);
        assert_eq!(ttl_seconds(Kind::Fifo, Some(60)), None);
    }

    #[test]
    fn a_waiters_pause_grows_by_half_the_time_waited_up_to_half_the_lease() {
        let ms = Duration::from_millis;
        let s = lock(Kind::FailOpen);
        assert_eq!(s.reread_interval(true, ms(0)), ms(10));
        assert_eq!(s.reread_interval(true, ms(100)), ms(60));
        assert_eq!(s.reread_interval(true, ms(60_000)), ms(5000), "half the lease");
        assert_eq!(
            s.reread_interval(false, ms(0)),
            ms(10),
            "others, after a new holder: the first's pace"
        );
        assert_eq!(
            s.reread_interval(false, ms(1)),
            ms(250),
            "others, the same holder again: the queue interval"
        );
        assert_eq!(s.reread_interval(false, ms(1000)), ms(510));
        let c = lock(Kind::FailClosed);
        assert_eq!(c.reread_interval(true, ms(60_000)), ms(2500), "half of acquirePeriodMs");
        assert_eq!(c.reread_interval(false, ms(0)), Duration::MAX);
        // A tiny lease: from a quarter of it, up to half of it.
        let mut tiny = s;
        tiny.lease_duration_ms = 4;
        tiny.reread = reread(4);
        assert_eq!(tiny.reread_interval(true, ms(0)), ms(1));
        assert_eq!(tiny.reread_interval(true, ms(100)), ms(2));
    }

    #[test]
    fn a_mark_is_renewed_per_heartbeat_and_stays_fresh_across_two_pauses() {
        let ms = Duration::from_millis;
        let s = lock(Kind::FailOpen);
        assert_eq!(s.mark_renew(), ms(3000));
        assert_eq!(s.mark_fresh(), ms(13_000));
        let mut beatless = s;
        beatless.heartbeat_period = Duration::ZERO;
        assert_eq!(beatless.mark_renew(), ms(3333), "a third of the lease");
        let mut c = lock(Kind::FailClosed);
        assert_eq!(c.mark_renew(), ms(5000), "acquirePeriodMs");
        c.acquire_period = Duration::ZERO;
        assert_eq!(c.mark_renew(), MARK_RENEW_MIN);
        assert_eq!(c.mark_fresh(), MARK_RENEW_MIN + ms(20));
    }

    #[test]
    fn a_releaser_stands_back_for_the_first_waiters_pause() {
        let ms = Duration::from_millis;
        let s = lock(Kind::FailOpen);
        assert_eq!(s.stand_back(ms(0)), ms(15));
        assert_eq!(s.stand_back(ms(40)), ms(35));
        assert_eq!(s.stand_back(ms(3_600_000)), ms(5005));
    }
}
