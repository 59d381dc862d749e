//! What each tokio runtime of the addon runs beside its work (the main one, and the heartbeat
//! scheduler's own): a timer that keeps the runtime's timer wheel from waking its I/O driver.

use std::time::Duration;

/// How far ahead `timer_floor` keeps its timer: shorter than any request timeout or lease
/// timer in common use, long enough that its own wake-ups cost nothing measurable.
const TIMER_FLOOR: Duration = Duration::from_secs(1);

/// Keeps one timer at most `TIMER_FLOOR` ahead in the runtime's timer wheel. Tokio's timer
/// driver wakes its I/O driver (an eventfd write, and a spurious return from `epoll_wait`)
/// whenever a new timer is earlier than every timer it holds, even when it is registered by
/// the running worker itself. Without a near timer in the wheel that is every request's
/// timeout and every heartbeat's lease timers: about two needless system calls per request.
pub async fn timer_floor() {
    loop {
        tokio::time::sleep(TIMER_FLOOR).await;
    }
}
