import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// The session's serial delegate queue, with the backpressure URLSession on Linux does not have.
///
/// URLSession's socket thread hands every 16 KiB chunk to the delegate queue with `addOperation` and
/// reads on; when the delegate falls behind (a slow disk, a busy machine), chunks pile up in memory
/// without limit (docs/platform.md: 800 MiB for 1 GiB). Here `addOperation` waits while
/// `limit` callbacks are already queued, so the socket thread stops reading and TCP slows the sender.
/// Under ferry's own transport (FerryURLProtocol) the callers are the blocks that hand each piece of body
/// on from the task's work queue, and each transfer also keeps at most 2 MiB on its way (CurlTransfer), so
/// this bound is the last line rather than the first; DelegateQueueTests pin it with corelibs' transport.
///
/// The thread that waits here is the session's work queue, and every call into the session that matters
/// (making, resuming or cancelling a task, invalidating the session) runs a block on that queue and waits
/// for it. A delegate callback making such a call while the queue is full would wait for the thread that
/// waits for it. So the engine makes every such call on a queue of its own, without waiting: `resume`,
/// `cancel`, `invalidate` and SessionTask. Callbacks added from the delegate queue itself never wait, and
/// a wait gives up after `maxWait`, so a call made elsewhere stalls for that long at most, never for ever.
///
/// Such a block is queued behind the socket thread's reading, so while a server sends faster than the
/// socket thread reads, the rest of the body arrives first, with or without this queue (a cancel at 4 of
/// 64 MiB from nginx on loopback: all 64 MiB arrived either way); a paced server leaves gaps and the
/// cancel lands at once (DelegateQueueTests). Calls made with the backpressure lifted meanwhile (as the
/// engine once did) let the rest of the body pile up here: 1.2 GiB for a 1 GiB file.
///
/// The callbacks run on a serial DispatchQueue of its own, not as Operations: corelibs' OperationQueue made an
/// Operation per callback, observed its state and scheduled the next one on a queue of its own (two thread
/// wakes and a dozen allocations per callback, 1,200 futex calls for 1,000 small files). URLSession only ever
/// calls `addOperation` with a block; the other ways of adding go to the same queue, in order.
package final class BoundedDelegateQueue: OperationQueue, @unchecked Sendable {
    package let limit: Int
    package let maxWait: TimeInterval
    // Guards `pending`, `waiters`, `peak` and `timedOut`.
    private let condition = NSCondition()
    private var pending = 0
    private var waiters = 0
    private var peak = 0
    private var timedOut = 0

    /// Serial: a concurrent queue reorders chunks.
    private let serial: DispatchQueue
    private static let onQueue = DispatchSpecificKey<ObjectIdentifier>()

    package init(limit: Int, maxWait: TimeInterval = 0.02, name: String) {
        self.limit = max(1, limit)
        self.maxWait = maxWait
        serial = DispatchQueue(label: name)
        super.init()
        maxConcurrentOperationCount = 1
        self.name = name
        serial.setSpecific(key: Self.onQueue, value: ObjectIdentifier(self))
    }

    /// Whether the caller runs on this queue (a callback adding another).
    private var isCurrent: Bool { DispatchQueue.getSpecific(key: Self.onQueue) == ObjectIdentifier(self) }

    /// The most callbacks that were queued at once (for tests and figures).
    package var peakPending: Int {
        condition.lock()
        defer { condition.unlock() }
        return peak
    }

    /// How many waits gave up after `maxWait` (for tests: a delegate stalled that long, or a call into the
    /// session made elsewhere than on the call queue).
    package var timedOutWaits: Int {
        condition.lock()
        defer { condition.unlock() }
        return timedOut
    }

    override package func addOperation(_ block: @escaping @Sendable () -> Void) {
        condition.lock()
        // Per chunk, so the full-queue case alone pays for finding out which queue is calling.
        if pending >= limit, !isCurrent {
            let deadline = Date(timeIntervalSinceNow: maxWait)
            waiters += 1
            while pending >= limit {
                if !condition.wait(until: deadline) {
                    timedOut += 1
                    break
                }
            }
            waiters -= 1
        }
        pending += 1
        peak = max(peak, pending)
        condition.unlock()
        serial.async { [self] in
            block()
            condition.lock()
            pending -= 1
            if waiters > 0, pending < limit { condition.broadcast() }
            condition.unlock()
        }
    }

    override package func addOperation(_ operation: Operation) {
        addOperation { operation.start() }
    }

    override package func addOperations(_ operations: [Operation], waitUntilFinished wait: Bool) {
        operations.forEach(addOperation)
        if wait, !isCurrent { serial.sync {} }
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

    /// Invalidates `session` after every call asked for before (a task made after it would be an error).
    package static func invalidate(_ session: URLSession) {
        callQueue.sync { session.invalidateAndCancel() }
    }

    /// Runs `then` after every call asked for before it has been made, without waiting.
    package static func afterCalls(_ then: @escaping @Sendable () -> Void) {
        callQueue.async(execute: then)
    }

    static let callQueue = DispatchQueue(label: "ferry.session-calls")
}
