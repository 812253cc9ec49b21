import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// A task that is made on the queue of `BoundedDelegateQueue.resume` and `cancel`, with the backpressure in
/// place. Making a task waits for the session's work queue as a resume does (`createNextTaskIdentifier`), and
/// made with the backpressure lifted it let a fast body pile up the same way: `ferry get -j 2` of a 1 GiB
/// file and three small ones peaked at 1.2 GiB RSS on loopback. The handle stands in for the task until
/// it exists; the engine keeps it and cancels through it.
package final class SessionTask: Sendable {
    private struct State {
        var task: URLSessionTask?
        var cancelled = false
    }
    private let state = Mutex(State())

    /// A handle with no task yet: an attempt that is a sequence of requests makes each with `next`.
    package init() {}

    /// Makes a task with `make` on the call queue, then hands it to `start` there, which registers and
    /// resumes it (at once, or after something else, as a warm-up does). Returns at once.
    /// A cancel asked for after this call is made after `start`: the queue is serial.
    package static func make(_ make: @escaping @Sendable () -> URLSessionTask,
                             start: @escaping @Sendable (URLSessionTask) -> Void) -> SessionTask {
        let handle = SessionTask()
        handle.next(make, start: start)
        return handle
    }

    /// The next task of the handle's sequence, made and started on the call queue as `make` does; when a
    /// cancel came first, none is made and `cancelled` is called instead (on the call queue).
    package func next(_ make: @escaping @Sendable () -> URLSessionTask, start: @escaping @Sendable (URLSessionTask) -> Void,
                      cancelled: @escaping @Sendable () -> Void = {}) {
        BoundedDelegateQueue.callQueue.async { [self] in
            guard !state.withLock({ $0.cancelled }) else { return cancelled() }
            let task = make()
            state.withLock { $0.task = task }
            start(task)
        }
    }

    /// Cancels the task, once it is made, and every later one of the sequence, without waiting.
    package func cancel() {
        BoundedDelegateQueue.callQueue.async { [self] in
            state.withLock { s -> URLSessionTask? in
                s.cancelled = true
                return s.task
            }?.cancel()
        }
    }
}
