import Dispatch
import Synchronization

/// Hands items to `deliver` on `queue`, in the order they were sent; items sent while a delivery is on its
/// way join it, so a burst costs one hop of the queue, not one each (the engine's events and a reporter's
/// lines for 1,000 small files woke their queues hundreds of times).
public final class BatchedDelivery<Item: Sendable>: Sendable {
    private let queue: DispatchQueue
    private let deliver: @Sendable ([Item]) -> Void
    private let waiting = Mutex<(items: [Item], scheduled: Bool)>(([], false))
    private let gathering: DispatchTimeInterval?

    /// - Parameter gathering: how long a delivery waits for more items after the first (nil: it goes at once).
    public init(queue: DispatchQueue, gathering: DispatchTimeInterval? = nil, deliver: @escaping @Sendable ([Item]) -> Void) {
        self.queue = queue
        self.gathering = gathering
        self.deliver = deliver
    }

    /// Callers that send from several threads keep their order by sending under a lock of their own.
    public func send(_ items: [Item]) {
        guard !items.isEmpty else { return }
        let schedule = waiting.withLock { waiting -> Bool in
            waiting.items += items
            defer { waiting.scheduled = true }
            return !waiting.scheduled
        }
        guard schedule else { return }
        if let gathering {
            queue.asyncAfter(deadline: .now() + gathering) { [self] in deliverWaiting() }
        } else {
            queue.async { [self] in deliverWaiting() }
        }
    }

    /// Delivers what waits now, on the queue, and returns after it (and after everything queued before).
    public func flush() {
        queue.sync { deliverWaiting() }
    }

    /// Each delivery takes everything waiting: a gathered one that comes after a flush finds nothing, or the
    /// items sent since.
    private func deliverWaiting() {
        let items = waiting.withLock { waiting -> [Item] in
            defer { waiting = ([], false) }
            return waiting.items
        }
        if !items.isEmpty { deliver(items) }
    }
}
