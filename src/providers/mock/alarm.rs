//! The mock's latency clock: wakes each waiting answer at its deadline to within tens of
//! microseconds. Tokio's timer counts whole milliseconds and rounds a deadline up, so a
//! 50 ms answer left after 51 ms on average, and a benchmark's ideal (answers of exactly the
//! configured latency) was out of reach of any client by 2 %.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Instant;

use tokio::sync::oneshot;

/// One deadline and the answer waiting for it.
type Waiting = (Instant, oneshot::Sender<()>);

/// A thread that sleeps until the next deadline (a futex wait with a timeout, which the
/// kernel keeps to its timer slack) and wakes every answer that is due.
#[derive(Debug)]
pub(super) struct Alarm {
    /// `None` when the thread could not start: answers then wait on tokio's timer.
    deadlines: Option<Mutex<Sender<Waiting>>>,
}

impl Alarm {
    /// Starts the alarm thread; it ends when the alarm is dropped.
    pub(super) fn start() -> Self {
        let (sender, receiver) = channel::<Waiting>();
        let started = std::thread::Builder::new().name("mock-alarm".into()).spawn(move || ring(&receiver));
        Self { deadlines: started.ok().map(|_| Mutex::new(sender)) }
    }

    /// Waits until `deadline`.
    pub(super) async fn sleep_until(&self, deadline: tokio::time::Instant) {
        let (wake, woken) = oneshot::channel();
        let sent = self
            .deadlines
            .as_ref()
            .is_some_and(|deadlines| deadlines.lock().unwrap_or_else(std::sync::PoisonError::into_inner).send((deadline.into_std(), wake)).is_ok());
        if !sent || woken.await.is_err() {
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// A waiting answer in the heap, ordered by its deadline alone.
struct Due(Waiting);

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.0.0 == other.0.0
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.0.cmp(&other.0.0)
    }
}

/// The alarm thread's loop: a heap of deadlines, fired in order.
fn ring(receiver: &Receiver<Waiting>) {
    let mut heap: BinaryHeap<Reverse<Due>> = BinaryHeap::new();
    loop {
        let now = Instant::now();
        while heap.peek().is_some_and(|Reverse(Due((deadline, _)))| *deadline <= now) {
            if let Some(Reverse(Due((_, wake)))) = heap.pop() {
                let _ = wake.send(());
            }
        }
        let received = match heap.peek() {
            Some(Reverse(Due((deadline, _)))) => receiver.recv_timeout(deadline.saturating_duration_since(now)),
            None => receiver.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(waiting) => heap.push(Reverse(Due(waiting))),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn sleepers_wake_in_deadline_order_and_never_early() {
        let alarm = std::sync::Arc::new(Alarm::start());
        let start = tokio::time::Instant::now();
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let sleepers: Vec<_> = [30_u64, 10, 20]
            .into_iter()
            .map(|ms| {
                let (alarm, order) = (std::sync::Arc::clone(&alarm), std::sync::Arc::clone(&order));
                tokio::spawn(async move {
                    alarm.sleep_until(start + Duration::from_millis(ms)).await;
                    assert!(start.elapsed() >= Duration::from_millis(ms), "woke before its deadline");
                    order.lock().unwrap().push(ms);
                })
            })
            .collect();
        for sleeper in sleepers {
            sleeper.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![10, 20, 30]);
    }
}
