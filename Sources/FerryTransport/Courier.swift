import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// How a transfer's results reach URLSession, whatever carries its bytes (CurlTransfer on libcurl, SFTPTransfer
/// over OpenSSH): queued on the transport's thread, handed to the task's work queue in one block at the end of a
/// round of the transport's loop (a small file's response, body and end cost one hop instead of three), and the
/// body's bytes counted as in flight until the delegate has had them. Past `maxBytesInFlight` the transfer stops
/// taking bytes (`mustWait`) and is told when it may go on (`drained`).
final class Courier: @unchecked Sendable {
    /// How results reach URLSession: on the task's work queue, in order, and never after a cancel.
    /// Touched on the work queue only. It lets go of the protocol and its client after the last delivery (or
    /// a cancel): the protocol holds its transfer, so keeping them would keep every finished transfer, its
    /// task and its last piece of body alive for good.
    final class Delivery: @unchecked Sendable {
        private var urlProtocol: URLProtocol?
        private var client: URLProtocolClient?
        let queue: DispatchQueue

        init(urlProtocol: URLProtocol, client: URLProtocolClient, queue: DispatchQueue) {
            self.urlProtocol = urlProtocol
            self.client = client
            self.queue = queue
        }

        func callAsFunction(_ work: (URLProtocol, URLProtocolClient) -> Void) {
            if let urlProtocol, let client { work(urlProtocol, client) }
        }

        /// After the last delivery, or a cancel (URLSession tells the client itself): nothing more is said.
        func end() {
            urlProtocol = nil
            client = nil
        }
    }

    let delivery: Delivery
    private let transport: CurlTransport
    private let delegateQueue: OperationQueue?
    /// Called (on the delegate's queue) when a transfer that had to wait may take bytes again.
    var drained: (@Sendable () -> Void)?

    /// Results of this round not posted yet, and the body bytes among them (transport thread).
    private var outbox: [@Sendable (Delivery) -> Void] = []
    private var outboxBytes = 0
    private var outboxAfter: [@Sendable () -> Void] = []
    private let inFlight = Atomic<Int>(0)
    private let pausedForBackpressure = Atomic<Bool>(false)

    /// At most `CurlTransport.inFlightBound` bytes of a transfer are on their way to the delegate (on the
    /// work queue, on the delegate queue); past it the transfer stops reading and the sender is slowed.
    var maxBytesInFlight: Int { transport.inFlightBound.load(ordering: .relaxed) }

    /// Where the delegate makes its calls into the session (TransportDelegate.transportAfterSessionCalls).
    private let afterSessionCalls: @Sendable (@escaping @Sendable () -> Void) -> Void

    init(delivery: Delivery, transport: CurlTransport, delegate: TransportDelegate?) {
        self.delivery = delivery
        self.transport = transport
        self.delegateQueue = delegate?.transportDelegateQueue
        afterSessionCalls = { [weak delegate] then in
            if let delegate { delegate.transportAfterSessionCalls(then) } else { then() }
        }
    }

    /// Queues a result for the task's work queue; the transport posts what a round queued (`post`).
    func deliver(bytes: Int = 0, _ work: @escaping @Sendable (Delivery) -> Void) {
        inFlight.add(bytes, ordering: .sequentiallyConsistent)
        if outbox.isEmpty { transport.willPost(self) }
        outbox.append(work)
        outboxBytes += bytes
    }

    /// `then` is called once the delegate has had what was queued so far (its queue ran after it) and the calls
    /// into the session it asked for meanwhile are made, on the task's work queue: whatever the delegate decided
    /// on it (a cancel of the task, whose stop URLSession queues there) has reached the transport before `then`
    /// sends anything there (transport thread; with something queued this round).
    func afterHandover(_ then: @escaping @Sendable () -> Void) {
        outboxAfter.append(then)
    }

    /// Hands the results of this round of the transport's loop to the task's work queue in one block.
    func post() {
        guard !outbox.isEmpty else { return }
        let works = outbox
        let bytes = outboxBytes
        let afters = outboxAfter
        outbox = []
        outboxBytes = 0
        outboxAfter = []
        let delivery = delivery
        let delegateQueue = delegateQueue
        let afterSessionCalls = afterSessionCalls
        delivery.queue.async { [self] in
            for work in works { work(delivery) }
            if !afters.isEmpty {
                let done: @Sendable () -> Void = { afterSessionCalls { delivery.queue.async { afters.forEach { $0() } } } }
                if let delegateQueue { delegateQueue.addOperation(done) } else { done() }
            }
            guard bytes > 0 else { return }
            // After the delegate's own operations for these bytes (the queue is serial), or at once without one.
            if let delegateQueue {
                delegateQueue.addOperation { self.handedOver(bytes) }
            } else {
                handedOver(bytes)
            }
        }
    }

    private func handedOver(_ bytes: Int) {
        let left = inFlight.subtract(bytes, ordering: .sequentiallyConsistent).newValue
        if left <= maxBytesInFlight / 2,
           pausedForBackpressure.compareExchange(expected: true, desired: false, ordering: .sequentiallyConsistent).exchanged {
            drained?()
        }
    }

    /// Whether the transfer must stop taking bytes now (too many on their way to the delegate): `drained` is
    /// called once enough of them have been handed over.
    func mustWait() -> Bool {
        guard inFlight.load(ordering: .sequentiallyConsistent) >= maxBytesInFlight else { return false }
        pausedForBackpressure.store(true, ordering: .sequentiallyConsistent)
        // Drained meanwhile? Then take the wait back (no delivery left to lift it) and go on.
        return inFlight.load(ordering: .sequentiallyConsistent) > maxBytesInFlight / 2
            || !pausedForBackpressure.compareExchange(expected: true, desired: false, ordering: .sequentiallyConsistent).exchanged
    }
}
