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
    private let task = Mutex<URLSessionTask?>(nil)

    private init() {}

    /// Makes a task with `make` on the call queue, then hands it to `start` there, which registers and
    /// resumes it (at once, or after something else, as a warm-up does). Returns at once.
    /// A cancel asked for after this call is made after `start`: the queue is serial.
    package static func make(_ make: @escaping @Sendable () -> URLSessionTask,
                             start: @escaping @Sendable (URLSessionTask) -> Void) -> SessionTask {
        let handle = SessionTask()
        BoundedDelegateQueue.callQueue.async {
            let task = make()
            handle.task.withLock { $0 = task }
            start(task)
        }
        return handle
    }

    /// Cancels the task, once it is made, without waiting.
    package func cancel() {
        BoundedDelegateQueue.callQueue.async { [self] in
            task.withLock { $0 }?.cancel()
        }
    }
}
