import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The session's serial delegate queue, with the backpressure URLSession on Linux does not have.
///
/// URLSession's socket thread hands every 16 KiB chunk to the delegate queue with `addOperation` and
/// reads on; when the delegate falls behind (a slow disk, a busy machine), chunks pile up in memory
/// without limit (notes/urlsession-on-linux.md: 800 MiB for 1 GiB). Here `addOperation` waits while
/// `limit` callbacks are already queued, so the socket thread stops reading and TCP slows the sender.
///
/// The thread that waits here is the session's work queue, and most calls into the session (creating,
/// resuming or cancelling a task) run a block on that queue and wait for it. A delegate callback making
/// such a call while the queue is full would wait for the thread that waits for it. So resumes and
/// cancels go through `resume` and `cancel`, which make the call on a queue of their own without waiting;
/// the other calls (creating a task, invalidating the session) go through `callingIntoSession`, and while
/// one is under way nothing waits here; any call missed stalls for `maxWait` at most, never for ever.
/// Callbacks added from the delegate queue itself never wait.
///
/// Such a block is queued behind the socket thread's reading, so while a server sends faster than the
/// socket thread reads, the rest of the body arrives first, with or without this queue (a cancel at 4 of
/// 64 MiB from nginx on loopback: all 64 MiB arrived either way); a paced server leaves gaps and the
/// cancel lands at once (DelegateQueueTests). With the backpressure lifted for that long, the rest of the
/// body piles up here: what `callingIntoSession` still costs when a task is created meanwhile.
package final class BoundedDelegateQueue: OperationQueue, @unchecked Sendable {
    package let limit: Int
    package let maxWait: TimeInterval
    // One lock and one count of calls for every instance: the work queues of all sessions in a process
    // share one serial target on Linux, so a call into any session can need the thread waiting in any queue.
    // The condition guards `sessionCalls`, `waiters` and each instance's `pending`, `peak` and `timedOut`.
    private static let condition = NSCondition()
    nonisolated(unsafe) private static var sessionCalls = 0
    nonisolated(unsafe) private static var waiters = 0
    private var condition: NSCondition { Self.condition }
    private var pending = 0
    private var peak = 0
    private var timedOut = 0

    package init(limit: Int, maxWait: TimeInterval = 0.02, name: String) {
        self.limit = max(1, limit)
        self.maxWait = maxWait
        super.init()
        maxConcurrentOperationCount = 1  // serial: a concurrent queue reorders chunks
        self.name = name
    }

    /// The most callbacks that were queued at once (for tests and figures).
    package var peakPending: Int {
        condition.lock()
        defer { condition.unlock() }
        return peak
    }

    /// How many waits gave up after `maxWait` (for tests: a call into the session that was not marked).
    package var timedOutWaits: Int {
        condition.lock()
        defer { condition.unlock() }
        return timedOut
    }

    override package func addOperation(_ block: @escaping @Sendable () -> Void) {
        condition.lock()
        // Per chunk, so the full-queue case alone pays for finding out which queue is calling.
        if pending >= limit, OperationQueue.current !== self {
            let deadline = Date(timeIntervalSinceNow: maxWait)
            Self.waiters += 1
            while pending >= limit, Self.sessionCalls == 0 {
                if !condition.wait(until: deadline) {
                    timedOut += 1
                    break
                }
            }
            Self.waiters -= 1
        }
        pending += 1
        peak = max(peak, pending)
        condition.unlock()
        super.addOperation { [self] in
            block()
            condition.lock()
            pending -= 1
            if Self.waiters > 0, pending < limit { condition.broadcast() }
            condition.unlock()
        }
    }

    /// Runs `body`, which may call into the session (or wait for a thread that does), with the
    /// backpressure lifted.
    package func callingIntoSession<T>(_ body: () throws -> T) rethrows -> T {
        condition.lock()
        Self.sessionCalls += 1
        if Self.waiters > 0 { condition.broadcast() }
        condition.unlock()
        defer {
            condition.lock()
            Self.sessionCalls -= 1
            condition.unlock()
        }
        return try body()
    }

    /// Cancels `task` from any thread without waiting: the call is made on a queue of its own, with the
    /// backpressure in place. Made with it lifted, a cancel that waited behind a fast body let that body pile
    /// up in memory (see above: 1.1 GiB for a 1 GiB file on loopback), and one made on the delegate queue
    /// stopped every transfer's callbacks meanwhile. Here the delegate queue keeps draining, so the socket
    /// thread never waits for long, and the call lands when it can.
    package static func cancel(_ task: URLSessionTask) {
        callQueue.async { task.cancel() }
    }

    /// Resumes `task` from any thread without waiting, after every resume and cancel asked for before (see cancel).
    package static func resume(_ task: URLSessionTask) {
        callQueue.async { task.resume() }
    }

    private static let callQueue = DispatchQueue(label: "ferry.session-calls")
}
