//! The one way this library runs a thread of its own: a named background thread that repeats a turn
//! until asked to stop (or until the turn says it is done), and is joined when stopped. Progress threads,
//! the multiplex progress thread and the enqueue engine threads are all this; each owner decides what a
//! turn does and which endpoint it may drive (docs/architecture.md, "Ownership and the progress helper").
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub struct BackgroundThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// What a turn asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    Again,
    Done,
}

impl BackgroundThread {
    /// Starts `name`, calling `turn` until [`stop`](Self::stop) or until it returns [`Turn::Done`].
    pub fn spawn(name: &str, mut turn: impl FnMut(&AtomicBool) -> Turn + Send + 'static) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new().name(name.to_string()).spawn(move || {
            crate::tools_link::tools_library_thread();
            while !flag.load(Ordering::Acquire) {
                if turn(&flag) == Turn::Done {
                    break;
                }
            }
        })?;
        Ok(BackgroundThread { stop, handle: Some(handle) })
    }

    /// Starts `name` running `body` once: for a thread with a loop and wake-up of its own (a queue
    /// worker sleeping on a condition variable), stopped through its own state, then [`join`]ed.
    ///
    /// [`join`]: Self::join
    pub fn run(name: &str, body: impl FnOnce() + Send + 'static) -> std::io::Result<Self> {
        let handle = std::thread::Builder::new().name(name.to_string()).spawn(move || {
            crate::tools_link::tools_library_thread();
            body()
        })?;
        Ok(BackgroundThread { stop: Arc::new(AtomicBool::new(false)), handle: Some(handle) })
    }

    /// Waits for the thread to end (a `run` thread whose own state told it to stop).
    pub fn join(mut self) {
        if let Some(h) = self.handle.take() {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }

    /// Whether the thread has ended (a `run` thread whose body returned).
    pub fn finished(&self) -> bool {
        self.handle.as_ref().is_none_or(|h| h.is_finished())
    }

    /// The thread, for waking it (`unpark`).
    pub fn thread(&self) -> Option<&std::thread::Thread> {
        self.handle.as_ref().map(|h| h.thread())
    }

    /// Asks the thread to stop after its current turn (without waiting).
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.join_now();
    }

    fn join_now(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            // Never join ourselves (a turn that stops its own thread).
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

impl Drop for BackgroundThread {
    fn drop(&mut self) {
        self.join_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn runs_turns_until_stopped() {
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        let t = BackgroundThread::spawn("test-turns", move |_| {
            m.fetch_add(1, Ordering::Relaxed);
            std::thread::yield_now();
            Turn::Again
        })
        .unwrap();
        while n.load(Ordering::Relaxed) < 10 {
            std::thread::yield_now();
        }
        t.stop();
        let after = n.load(Ordering::Relaxed);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(n.load(Ordering::Relaxed), after, "no turn after stop returned");
    }

    #[test]
    fn a_turn_can_end_the_thread() {
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        let t = BackgroundThread::spawn("test-done", move |_| {
            if m.fetch_add(1, Ordering::Relaxed) == 2 {
                Turn::Done
            } else {
                Turn::Again
            }
        })
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(n.load(Ordering::Relaxed), 3);
        t.stop();
    }
}
